"""Inference with the trainer's GPT: prefill and cached decoding, float or quantized, and its timing."""
