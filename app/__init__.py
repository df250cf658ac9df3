"""VoiceDesk desktop app: the Gradio UI and what it needs around the engine (library, history, playback)."""
