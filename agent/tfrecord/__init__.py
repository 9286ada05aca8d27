"""TFRecord integrity on the node: every record's length and masked CRC-32C checked, without TensorFlow."""
