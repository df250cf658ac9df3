"""Checks of a rendered take (words, voice, signal), each a score against a threshold the user sets,
and the rules that keep, retake or pick the best of several takes. No UI imports."""
