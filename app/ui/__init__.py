"""The Gradio layout: one module per tab (clone, design, voices, history) plus shared pieces."""
