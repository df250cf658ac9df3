"""Audio around the model: load any clip, prepare the reference, finish the output, resample, silence, speech
recognition, 16-bit PCM."""
