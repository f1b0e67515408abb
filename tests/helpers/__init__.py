"""What the plugin's tests share, in one package: the fake backend and its matrices
(``fake_backend``, ``fake_matrices``), stand-ins for FlashInfer's sources, compiler, harness and
kernels, FlashInfer release pieces and wheels, the hostile-input corpora, running a job as another
account, the test plugin (``plugins/``) and where the repository's files are (``paths``).

Test modules import from here and never from one another, so a test module can move or go
without breaking another."""
