"""FlashInfer's tactics as users meet them: the list its runner offers, in its order (a probe of
its own heuristic and dispatch), and the autotuner log lines that name them."""
