// Python bindings (nanobind): specdec_native._core.Drafter and SuffixCache; the module.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/array.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <stdexcept>

#include "bindings.h"

using specdec::Drafter;
using specdec::DrafterConfig;
using specdec::PyDrafter;
using specdec::RowTokens;
using specdec::SuffixCache;
using namespace specdec::py;

namespace {

using I32Vec = nb::ndarray<nb::ro, int32_t, nb::ndim<1>, nb::c_contig, nb::device::cpu>;
using I64Vec = nb::ndarray<nb::ro, int64_t, nb::ndim<1>, nb::device::cpu>;

// Row i of the batch: the request's tokens (int32 or int64, any stride), its draft and
// confidences written at row i of the outputs.
void propose_row(Drafter& d, const std::string& id, const AnyVec& toks, int k, int64_t* draft, double* conf,
                 int64_t* len) {
  d.propose(d.request(id), id, vector_row(toks, id), k, draft, conf, len);
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
  if (!py.out_lengths.is_valid()) throw std::invalid_argument("bind the outputs first");
  int64_t width = static_cast<int64_t>(py.out_tokens.shape(1));
  if (rows > py.out_lengths.shape(0)) throw std::invalid_argument("more rows than the bound outputs hold");
  for (size_t i = 0; i < rows; ++i) {
    if (ks[i] > width) throw std::invalid_argument("k larger than the bound outputs are wide");
    RowTokens row = buffer_row(py.tokens, buffer_rows[i], num_tokens[i], ids[i]);
    py.d.propose(py.d.request(ids[i]), ids[i], row, static_cast<int>(ks[i]), py.out_tokens.data() + i * width,
                 py.out_conf.data() + i * width, py.out_lengths.data() + i);
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
  specdec::bind_controller(m);
}
