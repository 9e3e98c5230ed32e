// defines: Attention (forward, backward, key/value-cache decoding)
#include "layers/attention.h"

#include <array>

#include "util/error.h"

namespace lmforge::layers {

using kernels::Tensor;

namespace {
// A [rows, cols] view starting `col` columns into each row of a [rows, stride]-shaped buffer, as [B, T, cols].
Tensor columns(const Tensor& base, int B, int T, int64_t col, int64_t cols) {
  Tensor t = base;
  t.data = static_cast<char*>(base.data) + (size_t)col * kernels::dtype_size(base.dtype);
  t.ndim = 3;
  t.shape = {B, T, cols, 0};
  t.row_stride = base.dim(-1);
  return t;
}

// Megatron's per-head layout [N, heads·nparts·hs] (columns [head][part][hs]) ↔ the parts the kernels read, each a
// contiguous [N, heads·hs] block (columns [head][hs]). Part p of the per-head rows is one [N·heads, hs] view with a
// row stride of nparts·hs (the rows of every head of every token, in order), which is the part's block seen as
// [N·heads, hs]: one copy per part. (A copy per head and part was 768 small copies a T5-small step, 1.5 % of it.)
// to_parts: per_head → parts, else parts → per_head.
void per_head_copy(const Tensor* parts, int nparts, const Tensor& per_head, int64_t heads, int64_t hs,
                   bool to_parts) {
  const int64_t N = per_head.rows();
  if (!per_head.contiguous() || per_head.dim(-1) != heads * nparts * hs)
    throw std::logic_error("per_head_copy: the per-head rows must be contiguous [N, heads·parts·hs]");
  for (int p = 0; p < nparts; p++) {
    if (!parts[p].contiguous() || parts[p].numel() != N * heads * hs)
      throw std::logic_error("per_head_copy: each part must be a contiguous [N, heads·hs] block");
    const Tensor a = parts[p].reshaped({N * heads, hs});
    Tensor b = per_head;
    b.data = static_cast<char*>(per_head.data) + (size_t)(p * hs) * kernels::dtype_size(per_head.dtype);
    b.ndim = 2;
    b.shape = {N * heads, hs, 0, 0};
    b.row_stride = nparts * hs;
    if (to_parts) kernels::copy(a, b);
    else kernels::copy(b, a);
  }
}

// Megatron's per-head rows: q, k and v (or their gradients) of a fused projection in `buf` (3·N·Cl elements) as
// three contiguous [N, Cl] blocks, which per_head_copy() fills.
std::array<Tensor, 3> part_blocks(const Tensor& buf, int64_t N, int64_t Cl) {
  const Tensor b = buf.reshaped({3, N, Cl});
  return {b.slice0(0, 1).reshaped({N, Cl}), b.slice0(1, 1).reshaped({N, Cl}), b.slice0(2, 1).reshaped({N, Cl})};
}
// The same three as the kernels read them, [B, T, Cl] views: those blocks (blocks), else columns of one [N, 3·Cl]
// activation (row stride 3·Cl).
std::array<Tensor, 3> fused_parts(const Tensor& buf, int B, int T, int64_t Cl, bool blocks) {
  const int64_t N = (int64_t)B * T;
  if (blocks) {
    const auto p = part_blocks(buf, N, Cl);
    return {p[0].reshaped({B, T, Cl}), p[1].reshaped({B, T, Cl}), p[2].reshaped({B, T, Cl})};
  }
  const Tensor c = buf.reshaped({N, 3 * Cl});
  return {columns(c, B, T, 0, Cl), columns(c, B, T, Cl, Cl), columns(c, B, T, 2 * Cl, Cl)};
}
}  // namespace

Attention::Attention(ParameterStore& store, const TensorParallel& tp, Workspace& workspace, AttentionSpec spec)
    : tp_(tp), workspace_(workspace), spec_(std::move(spec)), backend_(store.backend()) {
  const int T = tp_.size();
  if (spec_.heads % T != 0)
    throw Error(spec_.name + ": " + std::to_string(spec_.heads) + " attention heads cannot be split over " +
                std::to_string(T) + " tensor-parallel ranks (each rank takes whole heads)");
  if (spec_.cross && spec_.fused_qkv) throw std::logic_error("cross-attention projects q and k/v separately");
  if (spec_.qkv_per_head && !spec_.fused_qkv) throw std::logic_error("qkv_per_head needs fused_qkv");
  if (spec_.fused_kv && !spec_.cross) throw std::logic_error("fused_kv is for cross-attention");
  local_heads_ = spec_.heads / T;
  local_c_ = spec_.hidden / T;
  const int64_t C = spec_.hidden;
  auto column = [&](const std::string& name, int64_t out, int blocks) {
    LinearSpec s;
    s.name = spec_.name + "." + name;
    s.in = C;
    s.out = out;
    s.layout = spec_.layout;
    s.bias = spec_.bias;
    s.parallelism = Parallelism::COLUMN;
    s.blocks = blocks;
    s.init_std = spec_.init_std;
    return std::make_unique<Linear>(store, tp_, workspace_, s);
  };
  if (spec_.fused_qkv) {
    qkv_ = column(spec_.qkv, 3 * C, spec_.qkv_per_head ? 1 : 3);
  } else if (spec_.fused_kv) {
    q_ = column(spec_.q, C, 1);
    kv_ = column(spec_.kv, 2 * C, 1);
  } else {
    q_ = column(spec_.q, C, 1);
    k_ = column(spec_.k, C, 1);
    v_ = column(spec_.v, C, 1);
  }
  LinearSpec o;
  o.name = spec_.out_is_full_name ? spec_.out : spec_.name + "." + spec_.out;
  o.in = C;
  o.out = C;
  o.layout = spec_.layout;
  o.bias = spec_.bias;
  o.parallelism = Parallelism::ROW;
  o.init_std = spec_.out_init_std;
  out_ = std::make_unique<Linear>(store, tp_, workspace_, o);
}

Attention::~Attention() = default;

kernels::AttentionMask Attention::mask() const {
  return spec_.causal && !spec_.cross ? kernels::AttentionMask::CAUSAL : kernels::AttentionMask::NONE;
}

kernels::AttentionDropout Attention::dropout_spec(const ForwardStep& step) const {
  kernels::AttentionDropout d;
  d.key = dropout_key(step, spec_.attention_dropout, spec_.layer,
                      spec_.cross ? DropoutSite::CROSS_PROBS : DropoutSite::ATTENTION_PROBS);
  d.head_offset = local_heads_ * tp_.rank();
  d.total_heads = spec_.heads;
  return d;
}

void Attention::forward(const Tensor& out, const Tensor& x, const Tensor& memory, const Tensor& key_padding, int B,
                        int Tq, int Tk, const ForwardStep& step, Saved& sv) {
  const int64_t Cl = local_c_, Nq = (int64_t)B * Tq, Nk = (int64_t)B * Tk;
  if (!spec_.cross && Tk != Tq) throw std::logic_error("self-attention with Tk != Tq");
  sv.B = B, sv.Tq = Tq, sv.Tk = Tk;
  sv.x = x;
  sv.memory = spec_.cross ? memory : x;
  sv.key_padding = key_padding;
  sv.dropout = dropout_spec(step);
  Tensor q, k, v;
  if (spec_.fused_qkv) {
    sv.qkv_act.resize(backend_, workspace_.dtype(), (size_t)(Nq * 3 * Cl));
    const Tensor qkv = sv.qkv_act.view({Nq, 3 * Cl});
    if (spec_.qkv_per_head) {
      const Tensor ph = sized(backend_, workspace_.buffer(Slot::PER_HEAD), kernels::DType::F32, Nq, 3 * Cl);
      qkv_->forward(ph, x);
      per_head_copy(part_blocks(qkv, Nq, Cl).data(), 3, ph, local_heads_, Cl / local_heads_, true);
    } else {
      qkv_->forward(qkv, x);
    }
    const auto qkv3 = fused_parts(qkv, B, Tq, Cl, spec_.qkv_per_head);
    q = qkv3[0], k = qkv3[1], v = qkv3[2];
  } else {
    // q [Nq, Cl], then k and v as two contiguous [Nk, Cl] halves of one buffer.
    sv.q_act.resize(backend_, workspace_.dtype(), (size_t)(Nq * Cl));
    sv.kv_act.resize(backend_, workspace_.dtype(), (size_t)(2 * Nk * Cl));
    const Tensor qa = sv.q_act.view({Nq, Cl});
    const Tensor ka = sv.kv_act.view({Nk, Cl});
    const Tensor va = sv.kv_act.view({2, Nk, Cl}).slice0(1, 1).reshaped({Nk, Cl});
    q_->forward(qa, x);
    if (kv_) {
      const Tensor ph = sized(backend_, workspace_.buffer(Slot::PER_HEAD), kernels::DType::F32, Nk, 2 * Cl);
      kv_->forward(ph, sv.memory);
      const Tensor parts[2] = {ka, va};
      per_head_copy(parts, 2, ph, local_heads_, Cl / local_heads_, true);
    } else {
      k_->forward(ka, sv.memory);
      v_->forward(va, sv.memory);
    }
    q = qa.reshaped({B, Tq, Cl});
    k = ka.reshaped({B, Tk, Cl});
    v = va.reshaped({B, Tk, Cl});
  }
  sv.heads_out.resize(backend_, workspace_.dtype(), (size_t)(Nq * Cl));
  const Tensor heads = sv.heads_out.view({B, Tq, Cl});
  kernels::attention_forward(heads, probs(sv), q, k, v, (int)local_heads_, mask(), key_padding, sv.dropout);
  out_->forward(out, heads.reshaped({Nq, Cl}));
}

// The saved state of the call in `sv`, as the device keeps it (kernels::attention_saved: the probabilities
// [B, H/T, Tq, Tk] on the CPU, the per-row log-sum-exp [B, H/T, Tq] on CUDA); with recompute_core it is not kept
// between the forward and the backward, so the workspace's one ATTENTION_CORE buffer serves every call of every
// layer (a buffer per layer would hold as much as the kept states: GPT-2 124M at 1,024 tokens, 604 MB).
Tensor Attention::probs(Saved& sv) {
  kernels::Buffer& buf = spec_.recompute_core ? workspace_.buffer(Slot::ATTENTION_CORE) : sv.probs;
  const kernels::Device dev = backend_.device();
  buf.resize(backend_, kernels::DType::F32,
             (size_t)kernels::attention_saved_numel(dev, sv.B, local_heads_, sv.Tq, sv.Tk));
  return kernels::attention_saved_view(buf.data(), dev, sv.B, local_heads_, sv.Tq, sv.Tk);
}

void Attention::backward(const Tensor& dx, const Tensor& dmemory, const Tensor& dout, Saved& sv) {
  const int B = sv.B, Tq = sv.Tq, Tk = sv.Tk;
  const int64_t Cl = local_c_, Nq = (int64_t)B * Tq, Nk = (int64_t)B * Tk;
  const Tensor heads = sv.heads_out.view({Nq, Cl});
  const Tensor dheads = workspace_.take(Slot::D_ATTENTION, {Nq, Cl}, true);
  out_->backward(dheads, dout, heads);
  if (spec_.recompute_core) {
    // The core again, from the kept q, k, v: the same probabilities (and the same heads, rewritten in place).
    Tensor q, k, v;
    if (spec_.fused_qkv) {
      const auto qkv3 = fused_parts(sv.qkv_act.view({Nq, 3 * Cl}), B, Tq, Cl, spec_.qkv_per_head);
      q = qkv3[0], k = qkv3[1], v = qkv3[2];
    } else {
      q = sv.q_act.view({B, Tq, Cl});
      k = sv.kv_act.view({Nk, Cl}).reshaped({B, Tk, Cl});
      v = sv.kv_act.view({2, Nk, Cl}).slice0(1, 1).reshaped({B, Tk, Cl});
    }
    kernels::attention_forward(heads.reshaped({B, Tq, Cl}), probs(sv), q, k, v, (int)local_heads_, mask(),
                               sv.key_padding, sv.dropout);
  }
  const Tensor p = probs(sv);
  if (spec_.fused_qkv) {
    const Tensor dqkv = workspace_.take(Slot::D_QKV, {Nq, 3 * Cl}, true);
    const auto qkv3 = fused_parts(sv.qkv_act.view({Nq, 3 * Cl}), B, Tq, Cl, spec_.qkv_per_head);
    const auto dqkv3 = fused_parts(dqkv, B, Tq, Cl, spec_.qkv_per_head);
    kernels::attention_backward(dqkv3[0], dqkv3[1], dqkv3[2], dheads.reshaped({B, Tq, Cl}),
                                heads.reshaped({B, Tq, Cl}), qkv3[0], qkv3[1], qkv3[2], p, (int)local_heads_, mask(),
                                sv.key_padding, sv.dropout);
    if (spec_.qkv_per_head) {
      const Tensor dph = sized(backend_, workspace_.buffer(Slot::D_PER_HEAD), kernels::DType::F32, Nq, 3 * Cl);
      per_head_copy(part_blocks(dqkv, Nq, Cl).data(), 3, dph, local_heads_, Cl / local_heads_, false);
      qkv_->backward(dx, dph, sv.x);
    } else {
      qkv_->backward(dx, dqkv, sv.x);
    }
    return;
  }
  const Tensor qa = sv.q_act.view({Nq, Cl});
  const Tensor ka = sv.kv_act.view({Nk, Cl});
  const Tensor va = sv.kv_act.view({2, Nk, Cl}).slice0(1, 1).reshaped({Nk, Cl});
  const Tensor dq = workspace_.take(Slot::D_QKV, {Nq, Cl}, true);
  const Tensor dkv = workspace_.take(Slot::D_KV, {2, Nk, Cl}, true);
  const Tensor dk = dkv.slice0(0, 1).reshaped({Nk, Cl}), dv = dkv.slice0(1, 1).reshaped({Nk, Cl});
  kernels::attention_backward(dq.reshaped({B, Tq, Cl}), dk.reshaped({B, Tk, Cl}), dv.reshaped({B, Tk, Cl}),
                              dheads.reshaped({B, Tq, Cl}), heads.reshaped({B, Tq, Cl}), qa.reshaped({B, Tq, Cl}),
                              ka.reshaped({B, Tk, Cl}), va.reshaped({B, Tk, Cl}), p, (int)local_heads_, mask(),
                              sv.key_padding, sv.dropout);
  q_->backward(dx, dq, sv.x);
  const Tensor dmem = spec_.cross ? dmemory : dx;
  if (kv_) {
    const Tensor dph = sized(backend_, workspace_.buffer(Slot::D_PER_HEAD), kernels::DType::F32, Nk, 2 * Cl);
    const Tensor parts[2] = {dk, dv};
    per_head_copy(parts, 2, dph, local_heads_, Cl / local_heads_, false);
    kv_->backward(dmem, dph, sv.memory);
    return;
  }
  k_->backward(dmem, dk, sv.memory);
  v_->backward(dmem, dv, sv.memory);
}

void Attention::decode_begin(int B, int max_len) {
  if (spec_.cross) throw std::logic_error("decode_begin on cross-attention");
  const int64_t Cl = local_c_;
  kcache_.resize(backend_, workspace_.dtype(), (size_t)B * max_len * Cl);
  vcache_.resize(backend_, workspace_.dtype(), (size_t)B * max_len * Cl);
  dec_qkv_.resize(backend_, workspace_.dtype(), (size_t)B * 3 * Cl);
  dec_heads_.resize(backend_, workspace_.dtype(), (size_t)B * Cl);
  dec_scores_.resize(backend_, kernels::DType::F32, (size_t)B * local_heads_ * max_len);
  cache_B_ = B;
  cache_len_ = max_len;
}

void Attention::decode_begin_cross(const Tensor& memory, int B, int Tk) {
  if (!spec_.cross) throw std::logic_error("decode_begin_cross on self-attention");
  const int64_t Cl = local_c_, Nk = (int64_t)B * Tk;
  if (memory.rows() != Nk) throw std::logic_error("decode_begin_cross: memory is not [B·Tk, C]");
  // k and v as forward() lays them out: [B, Tk, Cl] each, contiguous, in the caches (full once, never appended).
  kcache_.resize(backend_, kernels::DType::F32, (size_t)(Nk * Cl));
  vcache_.resize(backend_, kernels::DType::F32, (size_t)(Nk * Cl));
  const Tensor ka = kcache_.view({Nk, Cl}), va = vcache_.view({Nk, Cl});
  if (kv_) {
    const Tensor ph = sized(backend_, workspace_.buffer(Slot::PER_HEAD), kernels::DType::F32, Nk, 2 * Cl);
    kv_->forward(ph, memory);
    const Tensor parts[2] = {ka, va};
    per_head_copy(parts, 2, ph, local_heads_, Cl / local_heads_, true);
  } else {
    k_->forward(ka, memory);
    v_->forward(va, memory);
  }
  dec_qkv_.resize(backend_, kernels::DType::F32, (size_t)B * Cl);
  dec_heads_.resize(backend_, kernels::DType::F32, (size_t)B * Cl);
  dec_scores_.resize(backend_, kernels::DType::F32, (size_t)B * local_heads_ * Tk);
  cache_B_ = B;
  cache_len_ = Tk;
}

// One new query per row over the cached memory keys/values: softmax(q·kᵀ/√d)·v over all Tk keys, then the output
// projection (the same math as forward() for that row, whose mask is NONE for cross-attention).
void Attention::decode_forward_cross(const Tensor& out, const Tensor& x) {
  const int B = cache_B_, Tk = cache_len_;
  const int64_t Cl = local_c_;
  const Tensor q = dec_qkv_.view({B, Cl});
  q_->forward(q, x);
  const Tensor heads = dec_heads_.view({B, Cl});
  kernels::attention_decode_forward(heads, dec_scores_.view({B, local_heads_, Tk}), q, kcache_.view({B, Tk, Cl}),
                                    vcache_.view({B, Tk, Cl}), Tk, (int)local_heads_);
  out_->forward(out, heads);
}

void Attention::decode_forward(const Tensor& out, const Tensor& x, int pos) {
  if (cache_B_ == 0) throw Error("attention decode: decode_begin() must come first");
  if (spec_.cross) return decode_forward_cross(out, x);
  if (pos >= cache_len_) throw Error("attention decode: position " + std::to_string(pos) + " beyond the cache");
  const int B = cache_B_, P = cache_len_;
  const int64_t Cl = local_c_;
  // The new position's q, k, v: [B, Cl] column views of one fused [B, 3·Cl] projection, or three contiguous blocks.
  Tensor q, k, v;
  if (spec_.fused_qkv) {
    const Tensor qkv = dec_qkv_.view({B, 3 * Cl});
    if (spec_.qkv_per_head) {
      const Tensor ph = sized(backend_, workspace_.buffer(Slot::PER_HEAD), kernels::DType::F32, B, 3 * Cl);
      qkv_->forward(ph, x);
      const auto parts = part_blocks(qkv, B, Cl);
      per_head_copy(parts.data(), 3, ph, local_heads_, Cl / local_heads_, true);
      q = parts[0], k = parts[1], v = parts[2];
    } else {
      qkv_->forward(qkv, x);
      auto part = [&](int64_t col) {
        Tensor t = columns(qkv, 1, B, col, Cl);
        t.ndim = 2;
        t.shape = {B, Cl, 0, 0};
        return t;
      };
      q = part(0), k = part(Cl), v = part(2 * Cl);
    }
  } else {
    const Tensor blocks = dec_qkv_.view({3, B, Cl});
    q = blocks.slice0(0, 1).reshaped({B, Cl});
    k = blocks.slice0(1, 1).reshaped({B, Cl});
    v = blocks.slice0(2, 1).reshaped({B, Cl});
    q_->forward(q, x);
    k_->forward(k, x);
    v_->forward(v, x);
  }
  // Position pos of every row of the caches: [B, Cl] views with a row stride of P·Cl.
  auto cache_row = [&](const kernels::Buffer& cache) {
    Tensor t = cache.view({B, Cl});
    t.data = static_cast<char*>(cache.data()) + (size_t)pos * Cl * kernels::dtype_size(cache.dtype());
    t.row_stride = (int64_t)P * Cl;
    return t;
  };
  kernels::copy(cache_row(kcache_), k);
  kernels::copy(cache_row(vcache_), v);
  const Tensor heads = dec_heads_.view({B, Cl});
  kernels::attention_decode_forward(heads, dec_scores_.view({B, local_heads_, P}), q, kcache_.view({B, P, Cl}),
                                    vcache_.view({B, P, Cl}), pos + 1, (int)local_heads_);
  out_->forward(out, heads);
}

}  // namespace lmforge::layers
