// What the binding files share: nanobind's array types and the drafter's Python object.
#pragma once
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "drafter.h"

namespace specdec {

namespace py {
namespace nb = nanobind;
using namespace nb::literals;
using AnyMat = nb::ndarray<nb::ro, nb::ndim<2>, nb::device::cpu>;
using AnyVec = nb::ndarray<nb::ro, nb::ndim<1>, nb::device::cpu>;
using I64Out = nb::ndarray<int64_t, nb::ndim<1>, nb::c_contig, nb::device::cpu>;
using I64OutMat = nb::ndarray<int64_t, nb::ndim<2>, nb::c_contig, nb::device::cpu>;
using F64OutMat = nb::ndarray<double, nb::ndim<2>, nb::c_contig, nb::device::cpu>;
}  // namespace py

// The drafter plus the arrays bound to it for the per-step path: vLLM's token buffer (the
// same array every step) and the outputs, so a step converts no array at all.
struct PyDrafter {
  explicit PyDrafter(const DrafterConfig& cfg) : d(cfg) {}
  Drafter d;
  py::AnyMat tokens;
  py::I64OutMat out_tokens;
  py::I64Out out_lengths;
  py::F64OutMat out_conf;
};

namespace py {
// A new numpy array of `shape`, zeroed, owned by Python.
template <typename T>
nb::ndarray<nb::numpy, T> owned(std::vector<size_t> shape) {
  size_t size = 1;
  for (size_t s : shape) size *= s;
  T* data = new T[size > 0 ? size : 1]();
  nb::capsule owner(data, [](void* p) noexcept { delete[] static_cast<T*>(p); });
  return nb::ndarray<nb::numpy, T>(data, shape.size(), shape.data(), owner);
}

// One request's tokens as an array of their own (int32 or int64, any stride).
inline RowTokens vector_row(const AnyVec& toks, const std::string& id) {
  bool wide = toks.dtype() == nb::dtype<int64_t>();
  if (!wide && toks.dtype() != nb::dtype<int32_t>())
    throw std::invalid_argument("request " + id + ": tokens must be int32 or int64");
  return RowTokens{toks.data(), wide, toks.shape(0), toks.stride(0)};
}

// One request's tokens as a row of vLLM's token buffer: row `row`, its first n tokens.
inline RowTokens buffer_row(const AnyMat& tokens, int64_t row, int64_t n, const std::string& id) {
  if (!tokens.is_valid()) throw std::invalid_argument("bind the token buffer first");
  bool wide = tokens.dtype() == nb::dtype<int64_t>();
  if (!wide && tokens.dtype() != nb::dtype<int32_t>()) throw std::invalid_argument("tokens must be int32 or int64");
  if (n < 0 || static_cast<size_t>(n) > tokens.shape(1) || row < 0 || static_cast<size_t>(row) >= tokens.shape(0))
    throw std::invalid_argument("request " + id + ": outside the token buffer");
  const char* start = static_cast<const char*>(tokens.data()) + row * tokens.stride(0) * (wide ? 8 : 4);
  return RowTokens{start, wide, static_cast<size_t>(n), tokens.stride(1)};
}
}  // namespace py

void bind_controller(nanobind::module_& m);  // bindings_controller.cc

}  // namespace specdec
