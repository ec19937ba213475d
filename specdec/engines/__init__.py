"""Engines that run generation: the real vLLM adapter and the replay simulator."""
