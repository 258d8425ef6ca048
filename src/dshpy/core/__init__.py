"""Pure data: the event envelope, vocabulary, message shapes, ids and the lossless JSON codec."""
