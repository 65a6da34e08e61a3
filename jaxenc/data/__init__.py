"""Dataset readers, vocabulary, word vectors and the batching pipeline."""
