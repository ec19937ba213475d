// Python bindings (nanobind): specdec_native._core.Controller, the compiled per-step controller
// (specdec/controller.py wraps it). `engine_step` is vLLM's whole proposer call:
// Python objects in (the batch's ids and sampled tokens), vLLM's list of drafts out.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <ctime>
#include <stdexcept>

#include "bindings.h"
#include "controller.h"
#include "step_shapes.h"

using namespace specdec;
using namespace specdec::py;

namespace {

double monotonic_seconds() {  // Python's time.perf_counter() clock on Linux
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

struct PyController {
  PyController(const ControllerConfig& cfg, PyDrafter& d)
      : drafter(d), c(cfg, d.d), k_max(cfg.k_max), k_ceiling(cfg.k_ceiling) {}
  PyDrafter& drafter;  // kept alive by the binding (keep_alive)
  Controller c;
  StepShapes shapes;
  int64_t k_max;
  int64_t k_ceiling;  // drafts per row at most: each row's stride in `drafts`
  StepCost cost{};
  bool has_cost = false;
  AnyVec num_tokens;  // vLLM's num_tokens_no_spec (its token buffer is the drafter's bound one)
  // per-step scratch, reused
  std::vector<std::string> ids, decoding_ids;
  std::vector<RowTokens> rows;
  std::vector<size_t> decoding;
  std::vector<int64_t> accepted, drafts, num_draft_tokens, contexts, prompt_lens;
};

int64_t element(const AnyVec& v, size_t i) {
  if (v.dtype() == nb::dtype<int32_t>()) return static_cast<const int32_t*>(v.data())[i * v.stride(0)];
  if (v.dtype() == nb::dtype<int64_t>()) return static_cast<const int64_t*>(v.data())[i * v.stride(0)];
  throw std::invalid_argument("token counts must be int32 or int64");
}

int64_t token_at(const RowTokens& r, size_t i) {
  return r.wide ? static_cast<const int64_t*>(r.data)[i * r.stride] : static_cast<const int32_t*>(r.data)[i * r.stride];
}

// One `Controller::step` over rows of their own arrays: drafts [rows, k_ceiling] and
// num_draft_tokens [rows], as new arrays.
nb::tuple step_arrays(PyController& py, const std::vector<std::string>& ids, const std::vector<AnyVec>& tokens,
                      const std::vector<int64_t>& accepted, const std::vector<int64_t>& prompt_lens, bool use_cost,
                      bool tail) {
  size_t n = ids.size();
  if (tokens.size() != n || accepted.size() != n)
    throw std::invalid_argument("ids, tokens and num_accepted differ in length");
  if (!prompt_lens.empty() && prompt_lens.size() != n) throw std::invalid_argument("one prompt length per row (or none)");
  if (use_cost && !py.has_cost) throw std::invalid_argument("no step cost set");
  py.rows.resize(n);
  for (size_t i = 0; i < n; ++i) py.rows[i] = vector_row(tokens[i], ids[i]);
  auto drafts = owned<int64_t>({n, static_cast<size_t>(py.k_ceiling)});
  auto num_draft_tokens = owned<int64_t>({n});
  py.c.step(ids, py.rows, accepted.data(), prompt_lens.empty() ? nullptr : prompt_lens.data(),
            use_cost ? &py.cost : nullptr, tail, drafts.data(), num_draft_tokens.data());
  return nb::make_tuple(drafts, num_draft_tokens);
}

// vLLM's proposer call: the first `num_rows` of `req_ids` are the batch (row i is buffer row
// i); a row whose `sampled[i]` is empty is still prefilling. Returns every row's draft (a
// list per row, as vLLM takes them) and, when `timed`, the clean step that just ran as
// (rows, tokens, KV tokens, seconds) or None. `forced_draft_tokens` >= 0: calibration, every
// decoding row drafts its last token that many times and the controller is not consulted.
nb::tuple engine_step(PyController& py, nb::list req_ids, size_t num_rows, nb::list sampled, bool use_cost,
                      int forced_draft_tokens, bool timed, nb::object num_prompt_tokens, bool tail) {
  double now = monotonic_seconds();
  if (nb::len(sampled) != num_rows || nb::len(req_ids) < num_rows)
    throw std::invalid_argument("sampled and req_ids do not cover the batch");
  if (!py.num_tokens.is_valid()) throw std::invalid_argument("bind the engine's buffers first");
  py.ids.resize(num_rows);
  py.decoding.clear();
  py.accepted.clear();
  bool all_decoding = true;
  for (size_t i = 0; i < num_rows; ++i) {
    Py_ssize_t size = 0;
    const char* text = PyUnicode_AsUTF8AndSize(PyList_GET_ITEM(req_ids.ptr(), i), &size);
    if (!text) throw nb::python_error();
    py.ids[i].assign(text, static_cast<size_t>(size));
    Py_ssize_t got = PyObject_Length(PyList_GET_ITEM(sampled.ptr(), i));
    if (got < 0) throw nb::python_error();
    if (got > 0) {
      py.decoding.push_back(i);
      py.accepted.push_back(got - 1);
    } else {
      all_decoding = false;
    }
  }
  StepShape shape;
  bool clean = timed && py.shapes.started(py.ids, all_decoding, now, shape);
  py.c.retire_missing(py.ids);
  size_t m = py.decoding.size();
  py.decoding_ids.resize(m);
  py.rows.resize(m);
  py.drafts.assign(m * py.k_ceiling, 0);
  py.num_draft_tokens.assign(m, 0);
  for (size_t j = 0; j < m; ++j) {
    size_t i = py.decoding[j];
    py.decoding_ids[j] = py.ids[i];
    py.rows[j] = buffer_row(py.drafter.tokens, static_cast<int64_t>(i), element(py.num_tokens, i), py.ids[i]);
  }
  py.prompt_lens.clear();
  if (!num_prompt_tokens.is_none()) {  // vLLM's input_batch.num_prompt_tokens: by batch row
    AnyVec prompts = nb::cast<AnyVec>(num_prompt_tokens);
    if (prompts.shape(0) < num_rows) throw std::invalid_argument("num_prompt_tokens does not cover the batch");
    for (size_t j = 0; j < m; ++j) py.prompt_lens.push_back(element(prompts, py.decoding[j]));
  }
  if (forced_draft_tokens >= 0) {
    if (forced_draft_tokens > py.k_max) throw std::invalid_argument("forced_draft_tokens larger than k_max");
    for (size_t j = 0; j < m; ++j) {
      if (py.rows[j].n == 0) throw std::invalid_argument("request " + py.decoding_ids[j] + ": no tokens");
      int64_t last = token_at(py.rows[j], py.rows[j].n - 1);
      for (int pos = 0; pos < forced_draft_tokens; ++pos) py.drafts[j * py.k_ceiling + pos] = last;
      py.num_draft_tokens[j] = forced_draft_tokens;
    }
  } else if (m) {
    if (use_cost && !py.has_cost) throw std::invalid_argument("no step cost set");
    py.c.step(py.decoding_ids, py.rows, py.accepted.data(), py.prompt_lens.empty() ? nullptr : py.prompt_lens.data(),
              use_cost ? &py.cost : nullptr, tail, py.drafts.data(), py.num_draft_tokens.data());
  }
  PyObject* out = PyList_New(static_cast<Py_ssize_t>(num_rows));
  if (!out) throw nb::python_error();
  nb::object result = nb::steal(out);
  for (size_t i = 0, j = 0; i < num_rows; ++i) {
    bool decodes = j < m && py.decoding[j] == i;
    Py_ssize_t len = decodes ? static_cast<Py_ssize_t>(py.num_draft_tokens[j]) : 0;
    PyObject* row = PyList_New(len);
    if (!row) throw nb::python_error();
    PyList_SET_ITEM(out, static_cast<Py_ssize_t>(i), row);
    for (Py_ssize_t t = 0; t < len; ++t) {
      PyObject* tok = PyLong_FromLongLong(py.drafts[j * py.k_ceiling + t]);
      if (!tok) throw nb::python_error();
      PyList_SET_ITEM(row, t, tok);
    }
    if (decodes) ++j;
  }
  if (timed) {
    py.contexts.resize(m);
    for (size_t j = 0; j < m; ++j) py.contexts[j] = static_cast<int64_t>(py.rows[j].n) - 1;
    py.shapes.finished(py.decoding_ids, py.num_draft_tokens, py.contexts, monotonic_seconds());
  }
  if (!clean) return nb::make_tuple(result, nb::none());
  return nb::make_tuple(result, nb::make_tuple(shape.num_seqs, shape.num_tokens, shape.num_kv_tokens,
                                                    shape.num_draft_kv_tokens, shape.seconds));
}

}  // namespace

void specdec::bind_controller(nb::module_& m) {
  nb::class_<PyController>(m, "Controller")
      .def("__init__",
           [](PyController* c, PyDrafter& drafter, int k_max, int k_ceiling, double acceptance_decay,
              double prior_weight, double max_token_gain, double lookup_decay) {
             ControllerConfig cfg;
             cfg.k_max = k_max;
             cfg.k_ceiling = k_ceiling;
             cfg.acceptance_decay = acceptance_decay;
             cfg.prior_weight = prior_weight;
             cfg.max_token_gain = max_token_gain;
             cfg.lookup_decay = lookup_decay;
             new (c) PyController(cfg, drafter);
           },
           nb::keep_alive<1, 2>(), "drafter"_a, nb::kw_only(), "k_max"_a, "k_ceiling"_a, "acceptance_decay"_a,
           "prior_weight"_a, "max_token_gain"_a, "lookup_decay"_a)
      .def("set_cost",
           [](PyController& py, double fixed_s, double per_seq_s, double per_token_s, double per_kv_token_s,
              double per_draft_kv_token_s) {
             py.cost = StepCost{fixed_s, per_seq_s, per_token_s, per_kv_token_s, per_draft_kv_token_s};
             py.has_cost = true;
           }, nb::kw_only(), "fixed_s"_a, "per_seq_s"_a, "per_token_s"_a, "per_kv_token_s"_a, "per_draft_kv_token_s"_a)
      .def("bind_engine", [](PyController& py, AnyVec num_tokens) { py.num_tokens = num_tokens; }, "num_tokens"_a)
      .def("step_arrays", &step_arrays, "ids"_a, "tokens"_a, "num_accepted"_a, "prompt_lens"_a, "use_cost"_a,
           "tail"_a)
      .def("engine_step", &engine_step, "req_ids"_a, "num_rows"_a, "sampled"_a, "use_cost"_a,
           "forced_draft_tokens"_a, "timed"_a, "num_prompt_tokens"_a.none(), "tail"_a)
      .def("finish", [](PyController& py, const std::string& id) { return py.c.finish(id); })
      .def("active_ids", [](PyController& py) { return py.c.active_ids(); })
      .def("forget_step_rows", [](PyController& py) { py.shapes.forget(); })
      .def_prop_ro("num_live", [](PyController& py) { return py.c.num_live(); })
      .def_prop_ro("num_step_rows", [](PyController& py) { return py.shapes.num_rows(); })
      .def_prop_rw("lookup_s", [](PyController& py) { return py.c.lookup_s; },
                   [](PyController& py, double v) { py.c.lookup_s = v; })
      .def_prop_rw("fixed_lookup_s", [](PyController& py) { return py.c.fixed_lookup_s; },
                   [](PyController& py, double v) { py.c.fixed_lookup_s = v; });
}
