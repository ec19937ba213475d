"""PNG plots of benchmark records (matplotlib, no display needed)."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any


def write_plots(records: list[dict[str, Any]], folder: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    real = [r for r in records if r["engine"] == "vllm"]
    replayed = [r for r in records if r["engine"] == "replay"]
    if real:
        written.append(_lines(real, "batch_size", "tokens_per_s", "batch size", "tokens/s",
                              folder / "tokens_per_s_vs_batch.png", log_x=True))
    if replayed:
        written.append(_lines(replayed, "k_max", "tokens_per_forward", "K (most draft tokens)",
                              "tokens per target forward", folder / "tokens_per_forward_vs_k.png"))
        written.append(_acceptance_by_position(replayed, folder / "acceptance_by_position.png"))
    projected = [r for r in records if r.get("cost_model") and r.get("best_k")]
    if projected:
        written.append(_projection_panels(projected, folder / "projected_speedup_vs_batch.png"))
    return written


def _projection_panels(records, path: Path) -> Path:
    """Projected speed-up over `none` against batch size: one panel per cost model, one
    line per method (at its best K for each batch size), one line style per dataset."""
    import matplotlib.pyplot as plt

    costs = sorted({r["cost_model"] for r in records})
    fig, axes = plt.subplots(1, len(costs), figsize=(6.5 * len(costs), 4.8), squeeze=False)
    for ax, cost in zip(axes[0], costs):
        series: dict[tuple[str, str], list[tuple[float, float]]] = defaultdict(list)
        for r in records:
            if r["cost_model"] == cost:
                series[(r["dataset"], r["method"])].append((r["batch_size"], r["speedup_vs_none"]))
        for (dataset, method), points in sorted(series.items()):
            points.sort()
            ours = method == "specdec"  # the product: drawn heavier
            ax.plot([p[0] for p in points], [p[1] for p in points], label=f"{dataset} {method}",
                    linewidth=2.6 if ours else 1.2, **_style(records, dataset, method))
        ax.axhline(1.0, color="grey", linewidth=0.8)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log", base=2)  # the oracle's ceiling stays on the page without flattening the rest
        ax.set_title(f"projected on {cost}{workload_label(records)}", fontsize=10)
        ax.set_xlabel("batch size (requests running at once)")
        ax.set_ylabel("speed-up over none (end to end)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=6, ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _lines(records, x_key, y_key, x_label, y_label, path: Path, log_x: bool = False) -> Path:
    import matplotlib.pyplot as plt

    series: dict[tuple[str, str], list[tuple[float, float]]] = defaultdict(list)
    for r in records:
        series[(r["dataset"], r["method"])].append((r[x_key], r[y_key]))
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for (dataset, method), points in sorted(series.items()):
        points.sort()
        ax.plot([p[0] for p in points], [p[1] for p in points], label=f"{dataset} {method}",
                **_style(records, dataset, method))
    if log_x:
        ax.set_xscale("log", base=2)
    ax.set_title(workload_label(records).lstrip(", "), fontsize=10)
    return _save(fig, ax, x_label, y_label, path)


def _acceptance_by_position(records, path: Path) -> Path:
    """Accepted drafts by position for the largest K of each dataset and method."""
    import matplotlib.pyplot as plt

    largest: dict[tuple[str, str], dict[str, Any]] = {}
    for r in records:
        key = (r["dataset"], r["method"])
        if r.get("accepted_per_pos") and (key not in largest or r["k_max"] > largest[key]["k_max"]):
            largest[key] = r
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for (dataset, method), r in sorted(largest.items()):
        counts = r["accepted_per_pos"]
        ax.plot(range(1, len(counts) + 1), counts, label=f"{dataset} {method} (K={r['k_max']})",
                **_style(records, dataset, method))
    return _save(fig, ax, "draft position", "accepted tokens", path)


def workload_label(records: list[dict[str, Any]]) -> str:
    """", T=0.8, 8 samples, epoch 2" for sampled or later-epoch records ("" for greedy ones)."""
    kinds = sorted({(r.get("temperature", 0.0), r.get("samples", 1), r.get("epoch", 1)) for r in records})
    parts = [f"T={t:g}, {s} sample{'s' if s > 1 else ''}" if t > 0 else "greedy" for t, s, _ in kinds]
    parts = [f"{p}, epoch {e}" if e > 1 else p for p, (_, _, e) in zip(parts, kinds)]
    return "" if parts == ["greedy"] else ", " + "; ".join(parts)


def _style(records, dataset: str, method: str) -> dict[str, Any]:
    """One colour per method, one line style and marker per dataset: readable with many lines."""
    methods = sorted({r["method"] for r in records})
    datasets = sorted({r["dataset"] for r in records})
    d = datasets.index(dataset)
    return {"color": f"C{methods.index(method) % 10}", "linestyle": ("-", "--", ":", "-.")[d % 4],
            "marker": ("o", "s", "^", "D")[d % 4]}


def _save(fig, ax, x_label: str, y_label: str, path: Path) -> Path:
    import matplotlib.pyplot as plt

    ax.set_xlabel(x_label)
    ax.set_ylabel(y_label)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
