"""VoiceDesk desktop app: the Gradio UI and what it needs around the engine (library, history, playback)."""
from pathlib import Path

ASSETS = Path(__file__).resolve().parent / "assets"  # CSS, icon, sample texts (package data)
