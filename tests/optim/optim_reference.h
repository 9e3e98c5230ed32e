// defines: the shared harness of the optimizer tests: run a Python reference, load its arrays, build parameter
// spans from them, and compare tensors by relative error
#pragma once
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "optim/optimizer.h"

namespace lmforge::optim::testing {

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
inline std::vector<T> read_raw(const std::string& path, size_t count) {
  std::vector<T> data(count);
  std::ifstream in(path, std::ios::binary);
  in.read(reinterpret_cast<char*>(data.data()), static_cast<std::streamsize>(count * sizeof(T)));
  if (!in) throw std::runtime_error("cannot read " + path);
  return data;
}

// Runs tests/optim/<name>_reference.py once per test process and loads the arrays it wrote (listed in its
// manifest.txt as "name ext count", raw little-endian f32 or f64).
inline const Reference& reference(const std::string& name) {
  static std::map<std::string, Reference> loaded;
  if (auto it = loaded.find(name); it != loaded.end()) return it->second;
  const Reference ref = [&] {
    // Per process: ctest runs each test case as its own process, possibly in parallel.
    const std::string dir =
        std::string(LMFORGE_BINARY_DIR) + "/test-data/optim_" + name + "." + std::to_string(::getpid());
    const std::string cmd = "/usr/bin/python3 " + std::string(LMFORGE_SOURCE_DIR) +
                            "/tests/optim/" + name + "_reference.py " + dir;
    if (std::system(cmd.c_str()) != 0) throw std::runtime_error("reference script failed: " + cmd);
    Reference r;
    std::ifstream manifest(dir + "/manifest.txt");
    std::string array, ext;
    size_t count = 0;
    while (manifest >> array >> ext >> count) {
      const std::string path = dir + "/" + array + "." + ext;
      if (ext == "f32") r.f32[array] = read_raw<float>(path, count);
      else r.f64[array] = read_raw<double>(path, count);
    }
    if (r.f32.empty()) throw std::runtime_error("empty reference manifest in " + dir);
    std::filesystem::remove_all(dir);
    return r;
  }();
  return loaded.emplace(name, ref).first->second;
}

// max|a − b| / max|b|: the per-tensor relative error used across the project.
inline double rel_error(const float* a, const std::vector<float>& b) {
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

inline Model make_model(const Reference& ref) {
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

inline void load_grads(Model& m, const Reference& ref, int step) {
  for (size_t i = 0; i < m.grads.size(); ++i)
    m.grads[i] = ref.at("grad" + std::to_string(i) + ".step" + std::to_string(step));
  // assignment may reallocate only if sizes differ; they do not, but keep the spans honest
  for (size_t i = 0; i < m.grads.size(); ++i)
    m.spans[i].grad = kernels::make_view(m.grads[i].data(), {(int64_t)m.grads[i].size()});
}

}  // namespace lmforge::optim::testing
