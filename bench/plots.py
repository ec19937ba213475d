"""The bench's outputs: text tables, JSON records and PNG plots (matplotlib, no display
needed): tokens/s or the projected speed-up against batch size, run time against shard size."""

from __future__ import annotations

import dataclasses
import json
import re
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any


@dataclasses.dataclass(frozen=True, kw_only=True)
class MethodRecord:
    """What a record of one method at one batch size carries (store-bench and the plots read it)."""

    method: str
    engine: str  # vllm, or projected:<cost model>
    dataset: str
    batch_size: int
    k_max: int  # 0 for none
    num_requests: int
    tokens_per_forward: float
    acceptance_rate: float
    outputs_identical_to_none: bool | None
    started_from: str
    accepted_per_pos: list[int]
    num_output_tokens: int
    tokens_per_s: float  # end to end
    temperature: float = 0.0  # the workload (bench.reference.Workload); the epoch measured
    samples: int = 1
    epoch: int = 1


Column = tuple[str, str]  # (title, its cells' format spec, e.g. ">10.1f")


def table(columns: Sequence[Column], rows: Iterable[Sequence[Any]]) -> list[str]:
    """Header, rule and a line per row, each cell formatted by its column's spec; None: "-"."""
    widths = [re.match(r"[<>^]?\d*", spec).group() for _, spec in columns]  # type: ignore[union-attr]
    head = "".join(f"{title:{width}}" for (title, _), width in zip(columns, widths))
    return [head, "-" * len(head), *("".join(f"{'-':{width}}" if value is None else format(value, spec)
                                             for value, (_, spec), width in zip(row, columns, widths)) for row in rows)]


def grouped(records: Sequence[Any], key: Callable[[Any], Any]) -> list[list[Any]]:
    """`records` in groups of equal `key`, in the order of each key's first record."""
    groups: dict[Any, list[Any]] = {}
    for r in records:
        groups.setdefault(key(r), []).append(r)
    return list(groups.values())


def write_outputs(records: list[Any], json_path: str | None, plots: str | None) -> None:
    """The records as JSON (`--json`) and PNG plots (`--plots` folder)."""
    rows = [dataclasses.asdict(r) for r in records]
    if json_path:
        Path(json_path).write_text(json.dumps(rows, indent=2))
        print(f"wrote {json_path}")
    for path in write_plots(rows, Path(plots)) if plots else []:
        print(f"wrote {path}")


def write_plots(records: list[dict[str, Any]], folder: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    folder.mkdir(parents=True, exist_ok=True)
    real = [r for r in records if r["engine"] == "vllm"]
    projected = [r for r in records if r.get("cost_model") and r.get("best_k")]
    written = []
    if real:
        written.append(_panels(real, [None], "tokens_per_s", "tokens/s (end to end)", folder / "tokens_per_s_vs_batch.png"))
    runs = [r for r in records if r["engine"].startswith("run:")]
    if runs:
        written.append(_run_times(runs, folder / "run_time_vs_shard.png"))
    if projected:
        costs = sorted({r["cost_model"] for r in projected})
        written.append(_panels(projected, costs, "speedup_vs_none", "speed-up over none (end to end)",
                               folder / "projected_speedup_vs_batch.png"))
    return written


def _panels(records: list[dict[str, Any]], costs: list[str | None], y_key: str, y_label: str, path: Path) -> Path:
    """`y_key` against batch size: one panel per cost model (None: the real engine), one line per
    dataset (its line style and marker) and method (its colour; a projection's at its best K)."""
    import matplotlib.pyplot as plt

    methods, datasets = sorted({r["method"] for r in records}), sorted({r["dataset"] for r in records})
    fig, axes = plt.subplots(1, len(costs), figsize=(6.5 * len(costs), 4.8), squeeze=False)
    for ax, cost in zip(axes[0], costs):
        series: dict[tuple[str, str], list[tuple[float, float]]] = defaultdict(list)
        for r in records:
            if r.get("cost_model") == cost:
                series[(r["dataset"], r["method"])].append((r["batch_size"], r[y_key]))
        for (dataset, method), points in sorted(series.items()):
            points.sort()
            ax.plot([p[0] for p in points], [p[1] for p in points], label=f"{dataset} {method}",
                    linewidth=2.6 if method == "specdec" else 1.2, color=f"C{methods.index(method) % 10}",
                    linestyle=("-", "--", ":", "-.")[datasets.index(dataset) % 4],
                    marker=("o", "s", "^", "D")[datasets.index(dataset) % 4])
        if cost is not None:
            ax.axhline(1.0, color="grey", linewidth=0.8)
            ax.set_yscale("log", base=2)  # the oracle's ceiling stays on the page without flattening the rest
        _label(ax, f"{'projected on ' + cost if cost else 'vLLM engine'}{workload_label(records)}",
               "batch size (requests running at once)", y_label, ncol=2)
    return _save(fig, path)


def workload_label(records: list[dict[str, Any]]) -> str:
    """", T=0.8, 8 samples, epoch 2" for sampled or later-epoch records ("" for greedy ones)."""
    kinds = sorted({(r.get("temperature", 0.0), r.get("samples", 1), r.get("epoch", 1)) for r in records})
    parts = [f"T={t:g}, {s} sample{'s' if s > 1 else ''}" if t > 0 else "greedy" for t, s, _ in kinds]
    parts = [f"{p}, epoch {e}" if e > 1 else p for p, (_, _, e) in zip(parts, kinds)]
    return "" if parts == ["greedy"] else ", " + "; ".join(parts)


def _run_times(records: list[dict[str, Any]], path: Path) -> Path:
    """Run time against shard size, sequential (dashed), streamed (solid) and the fluid bound (dotted)."""
    import matplotlib.pyplot as plt

    panels = sorted({r["rows"] for r in records})
    fig, axes = plt.subplots(1, len(panels), figsize=(6.5 * len(panels), 4.8), squeeze=False)
    for ax, rows in zip(axes[0], panels):
        lines = sorted({(r["cost_model"], r["dataset"], r["method"]) for r in records if r["rows"] == rows})
        for i, key in enumerate(lines):
            points = sorted((r["shard_size"], r["sequential_s"], r["stream_s"], r["fluid_s"]) for r in records
                            if (r["rows"], r["cost_model"], r["dataset"], r["method"]) == (rows, *key))
            x = [p[0] for p in points]
            ax.plot(x, [p[1] for p in points], "--o", color=f"C{i % 10}", label=f"{key[1]} {key[2]} sequential")
            ax.plot(x, [p[2] for p in points], "-s", color=f"C{i % 10}", label=f"{key[1]} {key[2]} stream")
            ax.axhline(points[0][3], color=f"C{i % 10}", linestyle=":", linewidth=0.8)
        ax.set_yscale("log")
        _label(ax, f"run on {records[0]['cost_model']}, {rows} rows at once (dotted: fluid bound)",
               "shard size (requests)", "run time (s)")
    return _save(fig, path)


def _label(ax: Any, title: str, x_label: str, y_label: str, ncol: int = 1) -> None:
    """The panels' common dress: log-2 x axis, title, axis labels, grid and legend."""
    ax.set_xscale("log", base=2)
    ax.set_title(title, fontsize=10)
    ax.set_xlabel(x_label)
    ax.set_ylabel(y_label)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=6, ncol=ncol)


def _save(fig: Any, path: Path) -> Path:
    import matplotlib.pyplot as plt

    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
