// defines: the pipeline-stage forward and backward of T5 (T5::forward_stage, backward_stage and their sizes)
#include "model/t5.h"
#include "util/error.h"

namespace lmforge::model {

using kernels::Tensor;

namespace {

void upload_ids(kernels::Backend& be, kernels::Buffer& buf, const int32_t* host, size_t n) {
  buf.resize(be, kernels::DType::I32, n);
  be.copy_to_device(buf.data(), host, n * sizeof(int32_t));
}

// buf as [rows, H] floats, zeroed.
Tensor zeros(kernels::Backend& be, kernels::Buffer& buf, int64_t rows, int64_t H) {
  buf.resize(be, kernels::DType::F32, (size_t)(rows * H));
  buf.zero();
  return buf.view({rows, H});
}

// buf as [rows, H] floats holding `host`.
Tensor copy_in(kernels::Backend& be, kernels::Buffer& buf, const float* host, int64_t rows, int64_t H) {
  buf.resize(be, kernels::DType::F32, (size_t)(rows * H));
  be.copy_to_device(buf.data(), host, (size_t)(rows * H) * sizeof(float));
  return buf.view({rows, H});
}

}  // namespace

// Encoder stages pass [Ne, H]; decoder stages pass [Nd + Ne, H]; the split stage S takes the encoder's [Ne, H].
size_t T5::stage_input_elements(int B, int Te, int Td) const {
  const size_t Ne = (size_t)B * Te, Nd = (size_t)B * Td, H = (size_t)config_.hidden;
  return (stage_.decoder && !stage_.pre_process ? Nd + Ne : Ne) * H;
}

size_t T5::stage_output_elements(int B, int Te, int Td) const {
  const size_t Ne = (size_t)B * Te, Nd = (size_t)B * Td, H = (size_t)config_.hidden;
  return (stage_.decoder ? Nd + Ne : Ne) * H;
}

Tensor T5::embed_both(const T5Inputs& in, const layers::ForwardStep& step) {
  const int64_t Ne = (int64_t)in.B * in.Te, Nd = (int64_t)in.B * in.Td;
  std::vector<int32_t> ids((size_t)(Ne + Nd)), pos((size_t)(Ne + Nd));
  std::copy(in.encoder_tokens, in.encoder_tokens + Ne, ids.begin());
  std::copy(in.decoder_tokens, in.decoder_tokens + Nd, ids.begin() + Ne);
  for (int64_t n = 0; n < Ne; n++) pos[(size_t)n] = (int32_t)(n % in.Te);
  for (int64_t n = 0; n < Nd; n++) pos[(size_t)(Ne + n)] = (int32_t)(n % in.Td);
  upload_ids(backend(), tokens_, ids.data(), ids.size());
  upload_ids(backend(), positions_, pos.data(), pos.size());
  return embedding_->forward(tokens_.view({Ne + Nd}), positions_.view({Ne + Nd}), Tensor{}, step);
}

double T5::forward_stage(const T5Inputs& in, const float* input, const layers::ForwardStep* step_ptr) {
  if (stage_.whole_model) return forward(in, step_ptr);
  have_forward_ = false;
  decode_B_ = 0;
  check_inputs(in, stage_.decoder && stage_.post_process);
  const layers::ForwardStep step = step_ptr ? *step_ptr : layers::ForwardStep{};
  B_ = in.B, Te_ = in.Te, Td_ = in.Td;
  kernels::Backend& be = backend();
  enc_pad_ = dec_pad_ = Tensor{};
  if (in.encoder_padding)
    upload_ids(be, enc_padding_, in.encoder_padding, (size_t)in.B * in.Te), enc_pad_ = enc_padding_.view({in.B, in.Te});
  if (in.decoder_padding)
    upload_ids(be, dec_padding_, in.decoder_padding, (size_t)in.B * in.Td), dec_pad_ = dec_padding_.view({in.B, in.Td});
  double loss = 0.0;
  if (stage_.decoder) {
    loss = decoder_stage_forward(in, input, step);
  } else {
    encoder_stage_forward(in, input, step);
  }
  have_forward_ = true;
  return loss;
}

void T5::encoder_stage_forward(const T5Inputs& in, const float* input, const layers::ForwardStep& step) {
  const int64_t Ne = (int64_t)in.B * in.Te, H = config_.hidden;
  kernels::Backend& be = backend();
  Tensor x = stage_.pre_process ? embed_both(in, step).slice0(0, Ne) : copy_in(be, stage_in_, input, Ne, H);
  for (auto& layer : encoder_) x = layer->forward(x, enc_pad_, Tensor{}, Tensor{}, in.B, in.Te, 0, step);
  enc_body_ = x;
  stage_out_ = x;
  if (stage_.post_process) {  // the encoder's output: its final LayerNorm
    enc_out_.resize(be, kernels::DType::F32, (size_t)(Ne * H));
    stage_out_ = enc_out_.view({Ne, H});
    encoder_norm_->forward(stage_out_, x);
  }
}

double T5::decoder_stage_forward(const T5Inputs& in, const float* input, const layers::ForwardStep& step) {
  const int64_t Ne = (int64_t)in.B * in.Te, Nd = (int64_t)in.B * in.Td, H = config_.hidden;
  kernels::Backend& be = backend();
  // The input stays until the backward: the layers keep views of it (the memory for cross-attention).
  Tensor y, memory;
  if (stage_.pre_process) {
    memory = copy_in(be, stage_in_, input, Ne, H);
    y = embed_both(in, step).slice0(Ne, Nd);
  } else {
    const Tensor both = copy_in(be, stage_in_, input, Nd + Ne, H);
    y = both.slice0(0, Nd);
    memory = both.slice0(Nd, Ne);
  }
  for (auto& layer : decoder_) y = layer->forward(y, dec_pad_, memory, enc_pad_, in.B, in.Td, in.Te, step);
  dec_body_ = y;
  if (!stage_.post_process) {  // [decoder rows | the encoder's output, passed on]
    stage_buf_.resize(be, kernels::DType::F32, (size_t)((Nd + Ne) * H));
    stage_out_ = stage_buf_.view({Nd + Ne, H});
    be.copy_on_device(stage_out_.f32(), y.f32(), (size_t)(Nd * H) * sizeof(float));
    be.copy_on_device(stage_out_.f32() + Nd * H, memory.f32(), (size_t)(Ne * H) * sizeof(float));
    return 0.0;
  }
  // The last stage: final LayerNorm, logits = dec_out·Eᵀ + b, lm = Σ CE·mask / Σ mask (as forward()).
  dec_out_.resize(be, kernels::DType::F32, (size_t)(Nd * H));
  const Tensor dec_out = dec_out_.view({Nd, H});
  decoder_norm_->forward(dec_out, y);
  logits_.resize(be, kernels::DType::F32, (size_t)(Nd * head_->local_out()));
  const Tensor logits = logits_.view({Nd, head_->local_out()});
  head_->forward(logits, dec_out);
  upload_ids(be, labels_, in.labels, (size_t)Nd);
  const double masked = loss_.forward(logits, labels_.view({Nd}), in.loss_mask, vocab_offset_);
  mask_sum_ = 0.0;
  for (int64_t n = 0; n < Nd; n++) mask_sum_ += (double)in.loss_mask[n];
  return masked / mask_sum_;  // 0/0 = NaN when nothing is masked, as in Megatron
}

void T5::backward_stage(const float* output_grad, float loss_scale) {
  if (stage_.whole_model) return backward(loss_scale);
  if (!have_forward_) throw Error("T5 backward: no forward() precedes it (or backward already ran)");
  have_forward_ = false;
  if (stage_.decoder) {
    decoder_stage_backward(output_grad, loss_scale);
  } else {
    encoder_stage_backward(output_grad);
  }
  if (ready_hook_) ready_hook_(0);
}

// d(loss)/d(output) came from the next stage (already scaled); down through the final LayerNorm (stage S − 1) and
// the layers to the embedding (stage 0) or to input_grad().
void T5::encoder_stage_backward(const float* output_grad) {
  const int64_t Ne = (int64_t)B_ * Te_, Nd = (int64_t)B_ * Td_, H = config_.hidden;
  kernels::Backend& be = backend();
  // On stage 0 the gradient of the whole lookup (the decoder's rows zero: they are the split stage's).
  const Tensor d_all = zeros(be, d_all_, stage_.pre_process ? Ne + Nd : Ne, H);
  const Tensor d_enc = d_all.slice0(0, Ne);
  if (stage_.post_process) {
    const Tensor d_memory = copy_in(be, d_memory_, output_grad, Ne, H);
    encoder_norm_->backward(d_enc, d_memory, enc_body_);
    hook_at("language_model.encoder.final_norm.weight");
  } else {
    be.copy_to_device(d_enc.data, output_grad, (size_t)(Ne * H) * sizeof(float));
  }
  for (size_t l = encoder_.size(); l-- > 0;) {
    encoder_[l]->backward(d_enc, Tensor{});
    if (ready_hook_) ready_hook_(table()[encoder_first_[l]].offset);
  }
  if (stage_.pre_process) {
    embedding_->backward(d_all);
  } else {
    d_input_ = d_enc;
  }
}

// The decoder rows' gradient runs down the layers; the encoder rows' gradient (what later stages sent back, plus
// each layer's cross-attention) goes back with it, alone from the split stage S (whose lookup takes the decoder's).
void T5::decoder_stage_backward(const float* output_grad, float loss_scale) {
  const int64_t Ne = (int64_t)B_ * Te_, Nd = (int64_t)B_ * Td_, H = config_.hidden;
  kernels::Backend& be = backend();
  Tensor d_dec, d_memory;
  if (stage_.pre_process) {  // the whole lookup's gradient (the encoder's rows zero: they are stage 0's)
    d_dec = zeros(be, d_all_, Ne + Nd, H).slice0(Ne, Nd);
    d_memory = zeros(be, d_memory_, Ne, H);
  } else {
    const Tensor both = zeros(be, d_stage_, Nd + Ne, H);
    d_dec = both.slice0(0, Nd);
    d_memory = both.slice0(Nd, Ne);
    d_input_ = both;
  }
  if (stage_.post_process) {
    if (mask_sum_ > 0.0) {
      const Tensor logits = logits_.view({Nd, head_->local_out()});
      loss_.backward(logits, (float)((double)loss_scale / mask_sum_));
      const Tensor d_out = zeros(be, d_dec_out_, Nd, H);
      head_->backward(d_out, logits, dec_out_.view({Nd, H}));
      decoder_norm_->backward(d_dec, d_out, dec_body_);
    }
    hook_at("language_model.decoder.final_norm.weight");
  } else {
    be.copy_to_device(d_dec.data, output_grad, (size_t)(Nd * H) * sizeof(float));
    be.copy_to_device(d_memory.data, output_grad + Nd * H, (size_t)(Ne * H) * sizeof(float));
  }
  for (size_t l = decoder_.size(); l-- > 0;) {
    decoder_[l]->backward(d_dec, d_memory);
    if (ready_hook_) ready_hook_(table()[decoder_first_[l]].offset);
  }
  if (stage_.pre_process) {
    embedding_->backward(d_all_.view({Ne + Nd, H}));
    d_input_ = d_memory;
  }
}

}  // namespace lmforge::model
