"""VoiceDesk as a Wyoming text-to-speech server (`voicedesk serve --wyoming`), for Home Assistant and other voice
assistants: info (the saved voices and the designed presets), synthesize, and streamed text (synthesize-start,
-chunk, -stop), each clause spoken as soon as it is complete (app/answer.py). README: "Home Assistant"."""
