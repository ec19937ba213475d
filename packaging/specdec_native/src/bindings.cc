// Python bindings (nanobind): specdec_native._core.Drafter and SuffixCache; the module.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <stdexcept>

#include "bindings.h"

using specdec::Drafter;
using specdec::DrafterConfig;
using specdec::MultiIndex;
using specdec::PyDrafter;
using specdec::RowTokens;
using specdec::SuffixCache;
using namespace specdec::py;

namespace {

using I32Vec = nb::ndarray<nb::ro, int32_t, nb::ndim<1>, nb::c_contig, nb::device::cpu>;
using I64Vec = nb::ndarray<nb::ro, int64_t, nb::ndim<1>, nb::device::cpu>;

// Row i's prompt length: prompt_lens[i], or unknown (-1) when none were given.
int64_t prompt_len_at(const std::vector<int64_t>& prompt_lens, size_t i) {
  return prompt_lens.empty() ? -1 : prompt_lens[i];
}

void check_prompt_lens(const std::vector<int64_t>& prompt_lens, size_t rows) {
  if (!prompt_lens.empty() && prompt_lens.size() != rows)
    throw std::invalid_argument("one prompt length per row (or none)");
}

// A batch: every row's tokens in (row i: request ids[i], its tokens rows(i)), then every row
// drafts at most max_draft_tokens(i) tokens, its draft and confidences written at row i of
// the outputs (rows `stride` apart), its length at num_draft_tokens[i].
template <typename Rows, typename Counts>
void propose_all(Drafter& d, const std::vector<std::string>& ids, const Rows& rows, const Counts& max_draft_tokens,
                 const std::vector<int64_t>& prompt_lens, int64_t* drafts, double* conf, int64_t* num_draft_tokens,
                 int64_t stride) {
  std::vector<Drafter::Request*> records(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    records[i] = &d.request(ids[i]);
    d.ingest(*records[i], ids[i], rows(i), prompt_len_at(prompt_lens, i));
  }
  d.maintain();
  for (size_t i = 0; i < ids.size(); ++i)
    d.draft(*records[i], static_cast<int>(max_draft_tokens(i)), drafts + i * stride, conf + i * stride,
            num_draft_tokens + i);
}

nb::tuple propose_batch(PyDrafter& py, const std::vector<std::string>& ids, const std::vector<AnyVec>& tokens,
                        const I64Vec& max_draft_tokens, const std::vector<int64_t>& prompt_lens) {
  size_t rows = ids.size();
  if (tokens.size() != rows || max_draft_tokens.shape(0) != rows)
    throw std::invalid_argument("ids, tokens and max_draft_tokens differ in length");
  check_prompt_lens(prompt_lens, rows);
  int64_t stride = 0;
  for (size_t i = 0; i < rows; ++i) stride = std::max(stride, max_draft_tokens(i));
  auto drafts = owned<int64_t>({rows, static_cast<size_t>(stride)});
  auto num_draft_tokens = owned<int64_t>({rows});
  auto conf = owned<double>({rows, static_cast<size_t>(stride)});
  propose_all(py.d, ids, [&](size_t i) { return vector_row(tokens[i], ids[i]); },
              [&](size_t i) { return max_draft_tokens(i); }, prompt_lens, drafts.data(), conf.data(),
              num_draft_tokens.data(), stride);
  return nb::make_tuple(drafts, num_draft_tokens, conf);
}

// The per-step path: row i's tokens are the bound buffer's row buffer_rows[i], [0,
// num_tokens[i]); its draft and confidences go to row i of the bound outputs.
void propose_rows(PyDrafter& py, const std::vector<std::string>& ids, const std::vector<int64_t>& buffer_rows,
                  const std::vector<int64_t>& num_tokens, const std::vector<int64_t>& max_draft_tokens,
                  const std::vector<int64_t>& prompt_lens) {
  size_t rows = ids.size();
  if (num_tokens.size() != rows || max_draft_tokens.size() != rows || buffer_rows.size() != rows)
    throw std::invalid_argument("ids, buffer_rows, num_tokens and max_draft_tokens differ in length");
  check_prompt_lens(prompt_lens, rows);
  if (!py.out_lengths.is_valid()) throw std::invalid_argument("bind the outputs first");
  int64_t stride = static_cast<int64_t>(py.out_tokens.shape(1));
  if (rows > py.out_lengths.shape(0)) throw std::invalid_argument("more rows than the bound outputs hold");
  for (size_t i = 0; i < rows; ++i)
    if (max_draft_tokens[i] > stride)
      throw std::invalid_argument("max_draft_tokens larger than the bound outputs are wide");
  propose_all(py.d, ids, [&](size_t i) { return buffer_row(py.tokens, buffer_rows[i], num_tokens[i], ids[i]); },
              [&](size_t i) { return max_draft_tokens[i]; }, prompt_lens, py.out_tokens.data(), py.out_conf.data(),
              py.out_lengths.data(), stride);
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

nb::tuple speculate(SuffixCache& c, const I32Vec& context, int max_draft_tokens, double min_prob) {
  specdec::CacheDraft got = c.speculate(context.data(), context.shape(0), max_draft_tokens, min_prob);
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

// The history, oldest first: (digests [n] uint64, lengths [n] int64, tokens [sum] int32).
nb::tuple history_arrays(Drafter& d) {
  size_t count = 0, total = 0;
  d.history().for_each([&](const specdec::PromptHistory::Completion& c) {
    ++count;
    total += c.tokens.size();
  });
  auto digests = owned<uint64_t>({count});
  auto lengths = owned<int64_t>({count});
  auto toks = owned<int32_t>({total});
  size_t i = 0, at = 0;
  d.history().for_each([&](const specdec::PromptHistory::Completion& c) {
    digests.data()[i] = c.digest;
    lengths.data()[i++] = static_cast<int64_t>(c.tokens.size());
    for (int32_t t : c.tokens) toks.data()[at++] = t;
  });
  return nb::make_tuple(digests, lengths, toks);
}

using U64Vec = nb::ndarray<nb::ro, uint64_t, nb::ndim<1>, nb::c_contig, nb::device::cpu>;
using I64CVec = nb::ndarray<nb::ro, int64_t, nb::ndim<1>, nb::c_contig, nb::device::cpu>;

// Completions from a file, oldest first: seeded into their prompt's group when it is made.
void load_history(Drafter& d, const U64Vec& digests, const I64CVec& lengths, const I32Vec& tokens) {
  size_t n = digests.shape(0);
  if (lengths.shape(0) != n) throw std::invalid_argument("one length per digest");
  size_t total = 0;
  for (size_t i = 0; i < n; ++i) {
    if (lengths(i) < 0) throw std::invalid_argument("negative completion length");
    total += static_cast<size_t>(lengths(i));
  }
  if (total != tokens.shape(0)) throw std::invalid_argument("completion lengths do not add up to the tokens");
  size_t at = 0;
  for (size_t i = 0; i < n; ++i) {
    size_t len = static_cast<size_t>(lengths(i));
    for (size_t j = 0; j < len; ++j)
      if (tokens(at + j) < 0) throw std::invalid_argument("negative token id");
    d.history().add(digests(i), std::vector<int32_t>(tokens.data() + at, tokens.data() + at + len), true);
    at += len;
  }
}

// Per request id with counts: {source name: (drafted and verified, accepted)}, then zeroed.
nb::dict take_source_counts(Drafter& d, const std::vector<std::string>& ids) {
  nb::dict out;
  specdec::SourceCounts counts;
  for (const std::string& id : ids) {
    if (!d.take_source_counts(id, counts)) continue;
    nb::dict by_source;
    for (int s = 0; s < specdec::kNumSources; ++s)
      by_source[specdec::kSourceNames[s]] = nb::make_tuple(counts[s][0], counts[s][1]);
    out[nb::str(id.data(), id.size())] = by_source;
  }
  return out;
}

nb::tuple source_names() {
  nb::list names;
  for (const char* name : specdec::kSourceNames) names.append(name);
  return nb::tuple(names);
}

uint64_t digest_of(const AnyVec& toks) {
  specdec::RowTokens row = vector_row(toks, "prompt");
  return row.wide ? specdec::prompt_digest(static_cast<const int64_t*>(row.data), row.n, row.stride)
                  : specdec::prompt_digest(static_cast<const int32_t*>(row.data), row.n, row.stride);
}

}  // namespace

NB_MODULE(_core, m) {
  m.doc() = "specdec's compiled drafting core (see specdec/controller.py)";
  m.attr("DRAFT_SOURCES") = source_names();  // where a drafted token came from, in counter order
  nb::class_<SuffixCache>(m, "SuffixCache")
      .def(nb::init<int, uint64_t>(), "max_depth"_a, "max_tokens"_a)
      .def("insert", [](SuffixCache& c, const std::string& id, const I32Vec& t) { c.insert(id, t.data(), t.shape(0)); })
      .def("remove", &SuffixCache::remove)
      .def("speculate", &speculate, "context"_a, "max_draft_tokens"_a, "min_prob"_a)
      .def("__len__", &SuffixCache::num_sequences)
      .def("__contains__", &SuffixCache::contains)
      .def_prop_ro("num_tokens", &SuffixCache::num_tokens)
      .def_prop_ro("num_nodes", &SuffixCache::num_nodes)
      .def_prop_ro("max_tokens", &SuffixCache::max_tokens)
      .def_prop_ro("max_depth", &SuffixCache::max_depth)
      .def("sequences", &sequences)
      .def("dump", &SuffixCache::dump)
      .def("check_invariants", &SuffixCache::check_invariants);
  nb::class_<PyDrafter>(m, "Drafter")
      .def("__init__", [](PyDrafter* d, int cache_max_depth, uint64_t cache_max_tokens, int lookup_min,
                          int lookup_max, double cache_min_prob, int min_cache_match, uint64_t group_max_tokens,
                          uint64_t history_max_tokens, int history_per_prompt, uint64_t live_slack_tokens) {
             if (history_per_prompt < 0) throw std::invalid_argument("history_per_prompt must be >= 0");
             DrafterConfig cfg;
             cfg.cache_max_depth = cache_max_depth;
             cfg.cache_max_tokens = cache_max_tokens;
             cfg.lookup_min = lookup_min;
             cfg.lookup_max = lookup_max;
             cfg.cache_min_prob = cache_min_prob;
             cfg.min_cache_match = min_cache_match;
             cfg.group_max_tokens = group_max_tokens;
             cfg.history_max_tokens = history_max_tokens;
             cfg.history_per_prompt = history_per_prompt;
             cfg.live_slack_tokens = live_slack_tokens;
             new (d) PyDrafter(cfg);
           }, nb::kw_only(), "cache_max_depth"_a, "cache_max_tokens"_a, "lookup_min"_a, "lookup_max"_a,
           "cache_min_prob"_a, "min_cache_match"_a, "group_max_tokens"_a, "history_max_tokens"_a,
           "history_per_prompt"_a, "live_slack_tokens"_a)
      .def("propose_batch", &propose_batch, "ids"_a, "tokens"_a, "max_draft_tokens"_a, "prompt_lens"_a)
      .def("bind_tokens", [](PyDrafter& py, AnyMat t) { py.tokens = t; }, "token_ids"_a)
      .def("bind_outputs", &bind_outputs, "tokens"_a, "lengths"_a, "confidence"_a)
      .def("propose_rows", &propose_rows, "ids"_a, "buffer_rows"_a, "num_tokens"_a, "max_draft_tokens"_a,
           "prompt_lens"_a)
      .def("feedback_rows", &feedback_rows, "ids"_a, "num_drafted"_a, "num_accepted"_a)
      .def("forget", [](PyDrafter& py, const std::string& id) { py.d.forget(id); })
      .def("best_confidence", [](PyDrafter& py) { return py.d.best_confidence(); })
      .def("set_table", [](PyDrafter& py, const std::vector<double>& acc, const std::vector<double>& rej) {
             auto& table = py.d.table();
             if (acc.size() != table.accepted().size() || rej.size() != acc.size())
               throw std::invalid_argument("one count per bucket");
             std::copy(acc.begin(), acc.end(), table.accepted().begin());
             std::copy(rej.begin(), rej.end(), table.rejected().begin());
           })
      .def_prop_ro("cache", [](PyDrafter& py) -> SuffixCache& { return py.d.cache(); }, nb::rv_policy::reference_internal)
      .def_prop_ro("num_requests", [](PyDrafter& py) { return py.d.num_requests(); })
      .def("history", [](PyDrafter& py) { return history_arrays(py.d); })
      .def("load_history", [](PyDrafter& py, const U64Vec& digests, const I64CVec& lengths, const I32Vec& tokens) {
             load_history(py.d, digests, lengths, tokens);
           }, "digests"_a, "lengths"_a, "tokens"_a)
      .def("take_source_counts", [](PyDrafter& py, const std::vector<std::string>& ids) {
             return take_source_counts(py.d, ids);
           }, "req_ids"_a)
      .def_prop_ro("num_finished_counts", [](PyDrafter& py) { return py.d.num_finished_counts(); })
      .def("group_digests", [](PyDrafter& py) { return py.d.groups().digests(); })
      .def_prop_ro("group_tokens", [](PyDrafter& py) { return py.d.groups().num_tokens(); })
      .def_prop_ro("live_group_tokens", [](PyDrafter& py) { return py.d.groups().live_group_tokens(); })
      .def_prop_ro("num_members", [](PyDrafter& py) { return py.d.num_members(); })
      .def_prop_ro("live_index_tokens", [](PyDrafter& py) { return py.d.live_index().num_tokens(); })
      .def_prop_ro("live_request_tokens", [](PyDrafter& py) { return py.d.live_tokens(); })
      .def_prop_ro("live_slack_tokens", [](PyDrafter& py) { return py.d.config().live_slack_tokens; })
      .def_prop_ro("num_live_rebuilds", [](PyDrafter& py) { return py.d.num_live_rebuilds(); })
      .def_prop_ro("history_tokens", [](PyDrafter& py) { return py.d.history().num_tokens(); });
  nb::class_<MultiIndex>(m, "MultiIndex")
      .def(nb::init<int>(), "lookup_max"_a)
      .def("add", [](MultiIndex& x, const I32Vec& t) { return x.add(t.data(), t.shape(0)); }, "tokens"_a)
      .def("extend", [](MultiIndex& x, int32_t slot, const I32Vec& t) {
             if (slot < 0 || static_cast<size_t>(slot) >= x.num_slots()) throw std::invalid_argument("no such slot");
             x.extend(slot, t.data(), t.shape(0));
           }, "slot"_a, "tokens"_a)
      .def("lookup", [](const MultiIndex& x, const I32Vec& context, int32_t exclude_slot,
                        int lookup_min) -> nb::object {
             const int32_t* c = context.data();
             specdec::MultiMatch got =
                 x.lookup([c](size_t i) { return c[i]; }, context.shape(0), exclude_slot, lookup_min);
             if (got.slot < 0) return nb::none();
             return nb::make_tuple(got.slot, got.end, got.len);
           }, "context"_a, "exclude_slot"_a, "lookup_min"_a)
      .def("sequence", [](const MultiIndex& x, int32_t slot) { return x.tokens(slot); }, "slot"_a)
      .def("__len__", &MultiIndex::num_slots)
      .def_prop_ro("num_tokens", &MultiIndex::num_tokens)
      .def_prop_ro("num_nodes", &MultiIndex::num_nodes);
  m.def("prompt_digest", &digest_of, "tokens"_a,
        "FNV-1a 64 of a prompt's token ids (tests/oracles/prompt_digest.py)");
  specdec::bind_controller(m);
}
