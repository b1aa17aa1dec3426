"""bugzoo where users train: its detectors inside Lightning and Hugging Face Trainers, their
callbacks benchmarked as bugzoo detectors, and stored runs shown in TensorBoard.

Each integration imports its optional library when imported itself; without it, the error
names the extra to install (``pip install "bugzoo-bench[lightning]"``)."""
