"""Text on its way to the model: cleanup, chunking, tokens, duration estimates, languages, voice-design instructs."""
