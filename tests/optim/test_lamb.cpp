// defines: tests of Lamb against apex FusedLAMB arithmetic transcribed in PyTorch (lamb_reference.py)
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "optim/lamb.h"
#include "util/error.h"

namespace lmforge::optim {
namespace {

struct Reference {
  std::map<std::string, std::vector<float>> f32;
  std::map<std::string, std::vector<double>> f64;

  const std::vector<float>& at(const std::string& name) const {
    auto it = f32.find(name);
    if (it == f32.end()) throw std::runtime_error("reference lacks " + name);
    return it->second;
  }
};

template <typename T>
std::vector<T> read_raw(const std::string& path, size_t count) {
  std::vector<T> data(count);
  std::ifstream in(path, std::ios::binary);
  in.read(reinterpret_cast<char*>(data.data()), static_cast<std::streamsize>(count * sizeof(T)));
  if (!in) throw std::runtime_error("cannot read " + path);
  return data;
}

// Runs the PyTorch reference once per test binary and loads what it wrote.
const Reference& reference() {
  static const Reference ref = [] {
    // Per process: ctest runs each test case as its own process, possibly in parallel.
    const std::string dir =
        std::string(LMFORGE_BINARY_DIR) + "/test-data/optim_lamb." + std::to_string(::getpid());
    const std::string cmd = "/usr/bin/python3 " + std::string(LMFORGE_SOURCE_DIR) +
                            "/tests/optim/lamb_reference.py " + dir;
    if (std::system(cmd.c_str()) != 0) throw std::runtime_error("reference script failed: " + cmd);
    Reference r;
    std::ifstream manifest(dir + "/manifest.txt");
    std::string name, ext;
    size_t count = 0;
    while (manifest >> name >> ext >> count) {
      const std::string path = dir + "/" + name + "." + ext;
      if (ext == "f32") r.f32[name] = read_raw<float>(path, count);
      else r.f64[name] = read_raw<double>(path, count);
    }
    if (r.f32.empty()) throw std::runtime_error("empty reference manifest in " + dir);
    std::filesystem::remove_all(dir);
    return r;
  }();
  return ref;
}

// max|a − b| / max|b|: the per-tensor relative error used across the project.
double rel_error(const float* a, const std::vector<float>& b) {
  double diff = 0.0, scale = 0.0;
  for (size_t i = 0; i < b.size(); ++i) {
    diff = std::max(diff, std::fabs(static_cast<double>(a[i]) - b[i]));
    scale = std::max(scale, std::fabs(static_cast<double>(b[i])));
  }
  return scale == 0.0 ? diff : diff / scale;
}

struct Model {
  std::vector<std::vector<float>> params, grads;
  std::vector<ParamSpan> spans;
};

Model make_model(const Reference& ref) {
  const auto& hyper = ref.f64.at("hyper");
  const size_t n = static_cast<size_t>(hyper[6]);
  const auto& decay = ref.at("decay");
  Model m;
  m.params.resize(n);
  m.grads.resize(n);
  for (size_t i = 0; i < n; ++i) {
    m.params[i] = ref.at("param" + std::to_string(i) + ".init");
    m.grads[i].assign(m.params[i].size(), 0.0f);
    m.spans.push_back(ParamSpan{std::string("p").append(std::to_string(i)), m.params[i].data(), m.grads[i].data(),
                                m.params[i].size(), decay[i] != 0.0f});
  }
  return m;
}

void load_grads(Model& m, const Reference& ref, int step) {
  for (size_t i = 0; i < m.grads.size(); ++i)
    m.grads[i] = ref.at("grad" + std::to_string(i) + ".step" + std::to_string(step));
  // assignment may reallocate only if sizes differ; they do not, but keep the spans honest
  for (size_t i = 0; i < m.grads.size(); ++i) m.spans[i].grad = m.grads[i].data();
}

TEST(Lamb, MatchesApexArithmeticAfterClippingOverTenSteps) {
  const Reference& ref = reference();
  const auto& hyper = ref.f64.at("hyper");
  const auto& lrs = ref.f64.at("lrs");
  const int steps = static_cast<int>(hyper[5]);
  Model m = make_model(ref);
  LambConfig config;
  config.beta1 = hyper[0];
  config.beta2 = hyper[1];
  config.eps = hyper[2];
  Lamb opt(m.spans, config);
  double worst = 0.0;
  for (int s = 0; s < steps; ++s) {
    load_grads(m, ref, s);
    clip_grad_norm(m.spans, hyper[4]);
    opt.step(lrs[s], hyper[3]);
    for (size_t i = 0; i < m.params.size(); ++i) {
      const double e =
          rel_error(m.params[i].data(), ref.at("param" + std::to_string(i) + ".step" + std::to_string(s)));
      worst = std::max(worst, e);
      EXPECT_LT(e, 1e-6) << "param " << i << " step " << s;
    }
  }
  std::printf("worst parameter relative error vs the LAMB reference over %d steps: %.3g\n", steps, worst);
  for (size_t i = 0; i < m.params.size(); ++i) {
    EXPECT_LT(rel_error(opt.exp_avg_of(i).data(), ref.at("exp_avg" + std::to_string(i))), 1e-6) << i;
    EXPECT_LT(rel_error(opt.exp_avg_sq_of(i).data(), ref.at("exp_avg_sq" + std::to_string(i))), 1e-6) << i;
  }
}

TEST(Lamb, ShardsOnTensorBoundariesEqualTheWhole) {
  const Reference& ref = reference();
  const auto& lrs = ref.f64.at("lrs");
  Model whole = make_model(ref), split = make_model(ref);
  Lamb full(whole.spans, LambConfig{});
  const size_t cut = whole.params[0].size() + whole.params[1].size();
  Lamb a(split.spans, LambConfig{}, 0, cut), b(split.spans, LambConfig{}, cut, Lamb::kAll);
  for (int s = 0; s < 4; ++s) {
    load_grads(whole, ref, s);
    load_grads(split, ref, s);
    full.step(lrs[s], 0.01);
    a.step(lrs[s], 0.01);
    b.step(lrs[s], 0.01);
  }
  for (size_t i = 0; i < whole.params.size(); ++i) EXPECT_EQ(whole.params[i], split.params[i]) << i;
  EXPECT_THROW(Lamb(split.spans, LambConfig{}, 1, cut), Error);
}

}  // namespace
}  // namespace lmforge::optim
