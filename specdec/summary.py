"""The one-screen summary printed after a generation run."""

from __future__ import annotations

import dataclasses

from specdec.stats import Totals


@dataclasses.dataclass(frozen=True)
class RunSummary:
    method: str
    config_hash: str
    num_requests: int
    engine_start_s: float
    generate_s: float
    stats: Totals  # the run's sums (ShardStats over all its requests, or RunStats)

    @property
    def tokens_per_s(self) -> float:
        return self.stats.num_output_tokens / self.generate_s if self.generate_s > 0 else 0.0

    def render(self) -> str:
        s = self.stats
        lines = [
            f"method             {self.method} (config {self.config_hash})",
            f"requests           {self.num_requests}",
            f"output tokens      {s.num_output_tokens}",
            f"engine start       {self.engine_start_s:.1f} s",
            f"generation         {self.generate_s:.1f} s  ->  {self.tokens_per_s:.1f} tokens/s",
            f"drafts             {s.num_drafts} ({s.num_draft_tokens} tokens drafted)",
            f"acceptance rate    {s.acceptance_rate:.3f}",
            f"tokens / forward   {s.tokens_per_forward:.3f}  (output tokens per target forward)",
        ]
        if s.accepted_per_pos:
            lines.append(f"accepted by pos    {s.accepted_per_pos}")
        if any(s.k_histogram):
            lines.append(f"K histogram        {s.k_histogram}  (index = K, 0 = no draft)")
        return "\n".join(lines)
