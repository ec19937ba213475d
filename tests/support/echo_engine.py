"""A test double for VllmEngine in flow-orchestration tests: it 'completes' a prompt with
its first max_tokens tokens, so listing, validation, staging, ingest, resume and failure
handling run for real in seconds. The real engine runs in the e2e and bad-input tests."""

from __future__ import annotations

from specdec.config import EngineConfig
from specdec.stats import RequestStats
from specdec.types import GenerationResult
from support.stepping import StepsAll


class EchoTokenizer:
    def encode(self, text: str) -> list[int]:
        return list(text.encode())[:64]


class EchoEngine(StepsAll):
    tokenizer = EchoTokenizer()  # no chat template: prompts are encoded as they are
    engine_config = EngineConfig(max_model_len=2048)

    def generate(self, requests, sampling, batch_size=None, show_progress=False, stall_timeout_s=None):
        out = []
        for r in requests:
            ids = list(r.prompt_token_ids[: r.max_tokens])
            n = len(ids)
            stats = RequestStats(n, max(1, n // 2), n // 2, 2 * (n // 2), n - max(1, n // 2),
                                 [n // 2, n - max(1, n // 2) - n // 2], [0, 0, n // 2], 0)
            out.append(GenerationResult(r.id, bytes(ids).decode(errors="replace"), ids, "length", stats, sample=r.sample))
        return out
