"""TensorFlow logs of every era, and `scan --tf`'s child."""
