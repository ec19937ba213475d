"""The text other requests wrote, as the drafter looks it up (the Python reference): prompt
groups, the live index and the per-prompt history that seeds the groups.

- A request whose prompt length P is known is a *member* with the sequence
  tokens[max(0, P - n_max):]: its prompt's last n_max tokens (so that a lookup at the end of
  the prompt matches) and its output as it arrives. A request of unknown prompt length is
  a member with its whole sequence, in the live index only.
- A *prompt group* (one per prompt digest) indexes (MultiIndex) the prompt's history
  completions loaded from the cache file (seeded first, oldest first, when the group is
  created) and every request of that prompt from its first step on, kept after it finishes.
  Groups are ordered by their last member joining; beyond `group_max_tokens` tokens in all,
  whole groups without a live member are dropped, least recently joined first.
- The *live index* holds every request seen since its last rebuild (all prompts, kept after
  they finish), so text a running request wrote is draftable by every other request from the
  next step on. Once it holds more than 2 * (tokens of live requests) + 65536 tokens it is
  rebuilt from the live requests alone, in the order they were first seen.
- A finished request's output joins the history of its prompt (PromptHistory).
"""

from __future__ import annotations

import dataclasses
from collections import OrderedDict

import numpy as np

from oracles.multi_index import MultiIndex
from oracles.prompt_digest import prompt_digest
from oracles.prompt_history import PromptHistory

DEFAULT_GROUP_MAX_TOKENS = 2_000_000
LIVE_SLACK_TOKENS = 65536  # finished requests' tokens the live index keeps beyond twice the live ones


@dataclasses.dataclass
class _Group:
    index: MultiIndex
    num_history: int  # slots below this are history completions, the others requests
    num_live: int = 0  # members not yet forgotten (a group with one is never dropped)


@dataclasses.dataclass
class _Member:
    """A request not yet forgotten."""

    offset: int  # its member sequence is tokens[offset:]
    length: int  # tokens of its member sequence so far
    live_slot: int
    prompt_len: int | None
    digest: int | None
    group: _Group | None
    group_slot: int  # -1: no group


@dataclasses.dataclass(frozen=True)
class SharedDraft:
    """A candidate drafted from another sequence: `source` is sibling, history or live."""

    source: str
    tokens: np.ndarray  # [<= max_draft_tokens] int64
    match_len: int


class LiveText:
    """Prompt groups, the live index and the history they are seeded from (see the module)."""

    def __init__(
        self, n_max: int, group_max_tokens: int, history: PromptHistory, live_slack_tokens: int | None = None
    ) -> None:
        """`live_slack_tokens` None: LIVE_SLACK_TOKENS as it is now (tests lower it)."""
        if group_max_tokens < 0:
            raise ValueError(f"group_max_tokens={group_max_tokens} must be >= 0")
        self.n_max = n_max
        self.group_max_tokens = group_max_tokens
        self.history = history
        self.live_slack_tokens = LIVE_SLACK_TOKENS if live_slack_tokens is None else live_slack_tokens
        self.groups: OrderedDict[int, _Group] = OrderedDict()  # digest -> group, least recently joined first
        self.group_tokens = 0  # tokens of all groups' member sequences
        self.live = MultiIndex(n_max)
        self.live_tokens = 0  # member tokens of the requests not yet forgotten
        self._members: dict[str, _Member] = {}  # in the order first seen

    def see(self, req_id: str, tokens: np.ndarray, prompt_len: int | None) -> None:
        """Take `req_id`'s sequence so far ([num_tokens]); `prompt_len` counts only at its first
        sight. Its new tokens are indexed (call `maintain` once the batch is in)."""
        member = self._members.get(req_id)
        if member is None:
            self._join(req_id, tokens, prompt_len)
            return
        length = len(tokens) - member.offset
        if length < member.length:
            raise ValueError(f"request {req_id}: fewer tokens ({len(tokens)}) than already seen "
                             f"({member.offset + member.length})")
        if length == member.length:
            return
        new = tokens[member.offset + member.length :]
        if member.group is not None:
            member.group.index.extend(member.group_slot, new)
            self.group_tokens += len(new)
        self.live.extend(member.live_slot, new)
        self.live_tokens += len(new)
        member.length = length

    def _join(self, req_id: str, tokens: np.ndarray, prompt_len: int | None) -> None:
        offset, digest, group, group_slot = 0, None, None, -1
        if prompt_len is not None:
            if not 0 <= prompt_len <= len(tokens):
                raise ValueError(f"request {req_id}: prompt length {prompt_len} outside [0, {len(tokens)}]")
            offset = max(0, prompt_len - self.n_max)
            digest = prompt_digest(tokens[:prompt_len].tolist())
            group = self.groups.get(digest)
            if group is None:
                group = self._new_group(digest, tokens[offset:prompt_len])
            else:
                self.groups.move_to_end(digest)
            group_slot = group.index.add(tokens[offset:])
            group.num_live += 1
            self.group_tokens += len(tokens) - offset
        live_slot = self.live.add(tokens[offset:])
        self.live_tokens += len(tokens) - offset
        self._members[req_id] = _Member(offset, len(tokens) - offset, live_slot, prompt_len, digest, group, group_slot)

    def _new_group(self, digest: int, prompt_tail: np.ndarray) -> _Group:
        index = MultiIndex(self.n_max)
        for completion in self.history.completions(digest, from_file_only=True):
            index.add(np.concatenate([prompt_tail, completion]))
        group = _Group(index, num_history=len(index))
        self.groups[digest] = group
        self.group_tokens += index.num_tokens
        return group

    def candidates(self, req_id: str, context: np.ndarray, max_draft_tokens: int, n_min: int) -> list[SharedDraft]:
        """The group's (sibling or history) and then the live index's draft of up to
        `max_draft_tokens` tokens after `context` ([num_tokens]: the request's tokens, maybe
        extended by its draft so far), each where there is one; the request's own member is
        excluded."""
        member = self._members[req_id]
        found: list[SharedDraft] = []
        if member.group is not None:
            hit = member.group.index.lookup(context, member.group_slot, n_min)
            if hit is not None:
                slot, end, match_len = hit
                source = "history" if slot < member.group.num_history else "sibling"
                draft = member.group.index.continuation(slot, end, max_draft_tokens)
                found.append(SharedDraft(source, draft, match_len))
        hit = self.live.lookup(context, member.live_slot, n_min)
        if hit is not None:
            slot, end, match_len = hit
            found.append(SharedDraft("live", self.live.continuation(slot, end, max_draft_tokens), match_len))
        return found

    def forget(self, req_id: str) -> None:
        """`req_id` finished: its output joins its prompt's history; it stays in its group and
        in the live index (until a rebuild) as a finished member. Then `maintain`."""
        member = self._members.pop(req_id, None)
        if member is None:
            return
        if member.group is not None:
            assert member.prompt_len is not None and member.digest is not None
            member.group.num_live -= 1
            completion = member.group.index.sequence(member.group_slot)[member.prompt_len - member.offset :]
            if completion.size:
                self.history.add(member.digest, completion)
        self.live_tokens -= member.length
        self.maintain()

    def maintain(self) -> None:
        """Apply the bounds: rebuild the live index when finished requests dominate it, then
        drop whole groups without a live member, least recently joined first."""
        if self.live.num_tokens > 2 * self.live_tokens + self.live_slack_tokens:
            rebuilt = MultiIndex(self.n_max)
            for member in self._members.values():
                member.live_slot = rebuilt.add(self.live.sequence(member.live_slot))
            self.live = rebuilt
        if self.group_tokens <= self.group_max_tokens:
            return
        for digest in list(self.groups):
            group = self.groups[digest]
            if group.num_live == 0:
                del self.groups[digest]
                self.group_tokens -= group.index.num_tokens
                if self.group_tokens <= self.group_max_tokens:
                    return

    def state_sizes(self) -> dict[str, tuple[int, int | None]]:
        """(size, bound) of each structure (after `maintain`); bound None: per live request."""
        live_group_tokens = sum(g.index.num_tokens for g in self.groups.values() if g.num_live)
        return {"shared_members": (len(self._members), None),
                "live_index_tokens": (self.live.num_tokens, 2 * self.live_tokens + self.live_slack_tokens),
                "group_tokens": (self.group_tokens, self.group_max_tokens + live_group_tokens),
                "history_tokens": (self.history.num_tokens, self.history.max_tokens)}

    def check_invariants(self) -> None:
        assert self.group_tokens == sum(g.index.num_tokens for g in self.groups.values())
        assert self.live_tokens == sum(m.length for m in self._members.values())
        assert sum(g.num_live for g in self.groups.values()) == sum(m.group is not None for m in self._members.values())
        for member in self._members.values():
            live_seq = self.live.sequence(member.live_slot)
            assert live_seq.size == member.length
            if member.group is not None:
                assert self.groups[member.digest] is member.group  # type: ignore[index]
                assert member.group_slot >= member.group.num_history
                assert member.group.index.sequence(member.group_slot).tolist() == live_seq.tolist()
        self.live.check_invariants()
        for group in self.groups.values():
            group.index.check_invariants()
        self.history.check_invariants()
