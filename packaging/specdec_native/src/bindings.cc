// Python bindings (nanobind): specdec_native._core.Drafter and SuffixCache.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
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

nb::tuple propose_batch(Drafter& d, const std::vector<std::string>& ids, const std::vector<AnyVec>& tokens,
                        const I64Vec& ks) {
  size_t rows = ids.size();
  if (tokens.size() != rows || ks.shape(0) != rows) throw std::invalid_argument("ids, tokens and ks differ in length");
  int64_t width = 0;
  for (size_t i = 0; i < rows; ++i) width = std::max(width, ks(i));
  auto drafts = owned<int64_t>({rows, static_cast<size_t>(width)});
  auto lengths = owned<int64_t>({rows});
  auto conf = owned<double>({rows, static_cast<size_t>(width)});
  for (size_t i = 0; i < rows; ++i)
    propose_row(d, ids[i], tokens[i], static_cast<int>(ks(i)), drafts.data() + i * width, conf.data() + i * width,
                lengths.data() + i);
  return nb::make_tuple(drafts, lengths, conf);
}

void feedback_batch(Drafter& d, const std::vector<std::string>& ids, const I64Vec& drafted, const I64Vec& accepted) {
  if (drafted.shape(0) != ids.size() || accepted.shape(0) != ids.size())
    throw std::invalid_argument("ids, num_drafted and num_accepted differ in length");
  for (size_t i = 0; i < ids.size(); ++i)
    if (drafted(i) > 0) d.feedback(ids[i], drafted(i), accepted(i));
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
  nb::class_<Drafter>(m, "Drafter")
      .def("__init__", [](Drafter* d, int max_depth, uint64_t max_tokens, int n_min, int n_max, double min_prob,
                          int min_cache_match) {
             new (d) Drafter(DrafterConfig{max_depth, max_tokens, n_min, n_max, min_prob, min_cache_match});
           }, "max_depth"_a, "max_tokens"_a, "n_min"_a, "n_max"_a, "min_prob"_a, "min_cache_match"_a)
      .def("propose_batch", &propose_batch, "ids"_a, "tokens"_a, "ks"_a)
      .def("feedback_batch", &feedback_batch, "ids"_a, "num_drafted"_a, "num_accepted"_a)
      .def("forget", &Drafter::forget)
      .def("best_confidence", &Drafter::best_confidence)
      .def("table", [](Drafter& d) { return nb::make_tuple(d.table().accepted(), d.table().rejected()); })
      .def("set_table", [](Drafter& d, const std::vector<double>& acc, const std::vector<double>& rej) {
             if (acc.size() != d.table().accepted().size() || rej.size() != acc.size())
               throw std::invalid_argument("one count per bucket");
             std::copy(acc.begin(), acc.end(), d.table().accepted().begin());
             std::copy(rej.begin(), rej.end(), d.table().rejected().begin());
           })
      .def_prop_ro("cache", &Drafter::cache, nb::rv_policy::reference_internal)
      .def_prop_ro("num_requests", &Drafter::num_requests)
      .def("memory_bytes", &Drafter::memory_bytes);
}
