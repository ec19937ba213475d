// Python bindings (nanobind): specdec_native._core.Drafter and SuffixCache.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/array.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <stdexcept>

#include "drafter.h"

namespace nb = nanobind;
using namespace nb::literals;
using specdec::Drafter;
using specdec::DrafterConfig;
using specdec::SuffixCache;

namespace {

using AnyMat = nb::ndarray<nb::ro, nb::ndim<2>, nb::device::cpu>;
using I64Out = nb::ndarray<int64_t, nb::ndim<1>, nb::c_contig, nb::device::cpu>;
using I64OutMat = nb::ndarray<int64_t, nb::ndim<2>, nb::c_contig, nb::device::cpu>;
using F64OutMat = nb::ndarray<double, nb::ndim<2>, nb::c_contig, nb::device::cpu>;

// The drafter plus the arrays bound to it for the per-step path: vLLM's token buffer (the
// same array every step) and the outputs, so a step converts no array at all.
struct PyDrafter {
  explicit PyDrafter(const DrafterConfig& cfg) : d(cfg) {}
  Drafter d;
  AnyMat tokens;
  I64OutMat out_tokens;
  I64Out out_lengths;
  F64OutMat out_conf;
};

using AnyVec = nb::ndarray<nb::ro, nb::ndim<1>, nb::device::cpu>;
using I32Vec = nb::ndarray<nb::ro, int32_t, nb::ndim<1>, nb::c_contig, nb::device::cpu>;
using I64Vec = nb::ndarray<nb::ro, int64_t, nb::ndim<1>, nb::device::cpu>;

template <typename T>
nb::ndarray<nb::numpy, T> owned(std::vector<size_t> shape) {
  size_t size = 1;
  for (size_t s : shape) size *= s;
  T* data = new T[size > 0 ? size : 1]();
  nb::capsule owner(data, [](void* p) noexcept { delete[] static_cast<T*>(p); });
  return nb::ndarray<nb::numpy, T>(data, shape.size(), shape.data(), owner);
}

// Row i of the batch: the request's tokens (int32 or int64, any stride), its draft and
// confidences written at row i of the outputs.
void propose_row(Drafter& d, const std::string& id, const AnyVec& toks, int k, int64_t* draft, double* conf,
                 int64_t* len) {
  size_t n = toks.shape(0);
  int64_t stride = toks.stride(0);
  if (toks.dtype() == nb::dtype<int64_t>()) {
    d.propose(id, static_cast<const int64_t*>(toks.data()), n, k, stride, draft, conf, len);
  } else if (toks.dtype() == nb::dtype<int32_t>()) {
    d.propose(id, static_cast<const int32_t*>(toks.data()), n, k, stride, draft, conf, len);
  } else {
    throw std::invalid_argument("request " + id + ": tokens must be int32 or int64");
  }
}

nb::tuple propose_batch(PyDrafter& py, const std::vector<std::string>& ids, const std::vector<AnyVec>& tokens,
                        const I64Vec& ks) {
  size_t rows = ids.size();
  if (tokens.size() != rows || ks.shape(0) != rows) throw std::invalid_argument("ids, tokens and ks differ in length");
  int64_t width = 0;
  for (size_t i = 0; i < rows; ++i) width = std::max(width, ks(i));
  auto drafts = owned<int64_t>({rows, static_cast<size_t>(width)});
  auto lengths = owned<int64_t>({rows});
  auto conf = owned<double>({rows, static_cast<size_t>(width)});
  for (size_t i = 0; i < rows; ++i)
    propose_row(py.d, ids[i], tokens[i], static_cast<int>(ks(i)), drafts.data() + i * width, conf.data() + i * width,
                lengths.data() + i);
  return nb::make_tuple(drafts, lengths, conf);
}

// The per-step path: row i's tokens are the bound buffer's row buffer_rows[i], [0,
// num_tokens[i]); its draft and confidences go to row i of the bound outputs.
void propose_rows(PyDrafter& py, const std::vector<std::string>& ids, const std::vector<int64_t>& buffer_rows,
                  const std::vector<int64_t>& num_tokens, const std::vector<int64_t>& ks) {
  size_t rows = ids.size();
  if (num_tokens.size() != rows || ks.size() != rows || buffer_rows.size() != rows)
    throw std::invalid_argument("ids, buffer_rows, num_tokens and ks differ in length");
  if (!py.tokens.is_valid() || !py.out_lengths.is_valid()) throw std::invalid_argument("bind the token buffer and outputs first");
  int64_t width = static_cast<int64_t>(py.out_tokens.shape(1));
  if (rows > py.out_lengths.shape(0)) throw std::invalid_argument("more rows than the bound outputs hold");
  bool wide = py.tokens.dtype() == nb::dtype<int64_t>();
  if (!wide && py.tokens.dtype() != nb::dtype<int32_t>()) throw std::invalid_argument("tokens must be int32 or int64");
  for (size_t i = 0; i < rows; ++i) {
    if (ks[i] > width) throw std::invalid_argument("k larger than the bound outputs are wide");
    if (num_tokens[i] < 0 || static_cast<size_t>(num_tokens[i]) > py.tokens.shape(1) || buffer_rows[i] < 0 ||
        static_cast<size_t>(buffer_rows[i]) >= py.tokens.shape(0))
      throw std::invalid_argument("request " + ids[i] + ": outside the token buffer");
    int64_t* draft = py.out_tokens.data() + i * width;
    double* conf = py.out_conf.data() + i * width;
    int64_t* len = py.out_lengths.data() + i;
    size_t n = static_cast<size_t>(num_tokens[i]);
    int64_t stride = py.tokens.stride(1);
    const char* row = static_cast<const char*>(py.tokens.data()) + buffer_rows[i] * py.tokens.stride(0) * (wide ? 8 : 4);
    if (wide) {
      py.d.propose(ids[i], reinterpret_cast<const int64_t*>(row), n, static_cast<int>(ks[i]), stride, draft, conf, len);
    } else {
      py.d.propose(ids[i], reinterpret_cast<const int32_t*>(row), n, static_cast<int>(ks[i]), stride, draft, conf, len);
    }
  }
}

void bind_outputs(PyDrafter& py, I64OutMat toks, I64Out lengths, F64OutMat conf) {
  if (toks.shape(0) != lengths.shape(0) || conf.shape(0) != toks.shape(0) || conf.shape(1) != toks.shape(1))
    throw std::invalid_argument("output shapes differ");
  py.out_tokens = toks;
  py.out_lengths = lengths;
  py.out_conf = conf;
}

// Feedback for the rows whose last draft was verified (lists: no array conversion).
double feedback_rows(PyDrafter& py, const std::vector<std::string>& ids, const std::vector<int64_t>& drafted,
                     const std::vector<int64_t>& accepted) {
  if (drafted.size() != ids.size() || accepted.size() != ids.size())
    throw std::invalid_argument("ids, num_drafted and num_accepted differ in length");
  for (size_t i = 0; i < ids.size(); ++i)
    if (drafted[i] > 0) py.d.feedback(ids[i], drafted[i], accepted[i]);
  return py.d.best_confidence();
}

nb::tuple speculate(SuffixCache& c, const I32Vec& context, int k, double min_prob) {
  specdec::CacheDraft got = c.speculate(context.data(), context.shape(0), k, min_prob);
  auto toks = owned<int64_t>({got.tokens.size()});
  auto probs = owned<double>({got.probs.size()});
  for (size_t i = 0; i < got.tokens.size(); ++i) {
    toks.data()[i] = got.tokens[i];
    probs.data()[i] = got.probs[i];
  }
  return nb::make_tuple(toks, probs, got.match_len);
}

nb::tuple sequences(const SuffixCache& c) {
  auto seqs = c.sequences();
  size_t total = 0;
  for (auto& s : seqs) total += s.second.size();
  auto toks = owned<int32_t>({total});
  auto lengths = owned<int64_t>({seqs.size()});
  std::vector<std::string> ids;
  size_t at = 0;
  for (size_t i = 0; i < seqs.size(); ++i) {
    ids.push_back(seqs[i].first);
    lengths.data()[i] = static_cast<int64_t>(seqs[i].second.size());
    for (int32_t t : seqs[i].second) toks.data()[at++] = t;
  }
  return nb::make_tuple(ids, toks, lengths);
}

}  // namespace

NB_MODULE(_core, m) {
  m.doc() = "specdec's compiled drafting core (see specdec/drafting/native.py)";
  nb::class_<SuffixCache>(m, "SuffixCache")
      .def(nb::init<int, uint64_t>(), "max_depth"_a, "max_tokens"_a)
      .def("insert", [](SuffixCache& c, const std::string& id, const I32Vec& t) { c.insert(id, t.data(), t.shape(0)); })
      .def("remove", &SuffixCache::remove)
      .def("speculate", &speculate, "context"_a, "k"_a, "min_prob"_a = 0.0)
      .def("__len__", &SuffixCache::num_sequences)
      .def("__contains__", &SuffixCache::contains)
      .def_prop_ro("num_tokens", &SuffixCache::num_tokens)
      .def_prop_ro("num_nodes", &SuffixCache::num_nodes)
      .def_prop_ro("max_tokens", &SuffixCache::max_tokens)
      .def_prop_ro("max_depth", &SuffixCache::max_depth)
      .def("memory_bytes", &SuffixCache::memory_bytes)
      .def("sequences", &sequences)
      .def("dump", &SuffixCache::dump)
      .def("check_invariants", &SuffixCache::check_invariants);
  nb::class_<PyDrafter>(m, "Drafter")
      .def("__init__", [](PyDrafter* d, int max_depth, uint64_t max_tokens, int n_min, int n_max, double min_prob,
                          int min_cache_match) {
             new (d) PyDrafter(DrafterConfig{max_depth, max_tokens, n_min, n_max, min_prob, min_cache_match});
           }, "max_depth"_a, "max_tokens"_a, "n_min"_a, "n_max"_a, "min_prob"_a, "min_cache_match"_a)
      .def("propose_batch", &propose_batch, "ids"_a, "tokens"_a, "ks"_a)
      .def("bind_tokens", [](PyDrafter& py, AnyMat t) { py.tokens = t; }, "token_ids"_a)
      .def("bind_outputs", &bind_outputs, "tokens"_a, "lengths"_a, "confidence"_a)
      .def("propose_rows", &propose_rows, "ids"_a, "buffer_rows"_a, "num_tokens"_a, "ks"_a)
      .def("feedback_rows", &feedback_rows, "ids"_a, "num_drafted"_a, "num_accepted"_a)
      .def("forget", [](PyDrafter& py, const std::string& id) { py.d.forget(id); })
      .def("best_confidence", [](PyDrafter& py) { return py.d.best_confidence(); })
      .def("table", [](PyDrafter& py) { return nb::make_tuple(py.d.table().accepted(), py.d.table().rejected()); })
      .def("set_table", [](PyDrafter& py, const std::vector<double>& acc, const std::vector<double>& rej) {
             auto& table = py.d.table();
             if (acc.size() != table.accepted().size() || rej.size() != acc.size())
               throw std::invalid_argument("one count per bucket");
             std::copy(acc.begin(), acc.end(), table.accepted().begin());
             std::copy(rej.begin(), rej.end(), table.rejected().begin());
           })
      .def_prop_ro("cache", [](PyDrafter& py) -> SuffixCache& { return py.d.cache(); }, nb::rv_policy::reference_internal)
      .def_prop_ro("num_requests", [](PyDrafter& py) { return py.d.num_requests(); })
      .def("memory_bytes", [](PyDrafter& py) { return py.d.memory_bytes(); });
}
