"""The language model: OmniVoice's Qwen3 body, checkpoint loading, prompts, the unmasking loop (eager and graphed)."""
