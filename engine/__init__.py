"""VoiceDesk engine: turns (voice, text) into audio. No UI imports here."""
