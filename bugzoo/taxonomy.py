"""Published taxonomies of real training faults, as keys a bug declares it plants.

Each leaf of five published catalogues (and a list of documented LLM-era incidents) has a
stable key: ``H.`` Humbatova et al., "Taxonomy of Real Faults in Deep Learning Systems" (ICSE
2020); ``T.`` the real silent errors TrainCheck reproduces (Jiang et al., OSDI 2025); ``D.``
DeepFD's fault types (Cao et al., ICSE 2022); ``A.`` AUTOTRAINER's training problems (Zhang et
al., ICSE 2021); ``J.`` the fault types Jahangirova et al. counted in five fault benchmarks
(arXiv 2412.16336); ``L.`` LLM-era training bugs with public incident reports.

A bug names the leaves it plants in ``Bug.taxonomy``: ``"literal"`` when it plants the mechanism
as the source describes it, ``"partial: <how it differs>"`` when it plants a related mechanism,
a narrow sub-form or the same effect through another cause. ``bugzoo results coverage`` tallies the
declarations against this list (``results/coverage.md``).

A leaf is in scope when its mechanism can be written into the user code of one PyTorch training
process with a small model; multi-process faults are the ``distributed`` extension, counted
apart, and hardware, compiler-internal, TensorFlow-1-only and generation-only faults are out.
"""

from __future__ import annotations

from dataclasses import dataclass

LITERAL = "literal"
PARTIAL = "partial: "  # followed by how the plant differs from the leaf


@dataclass(frozen=True)
class Source:
    """One published catalogue: its key prefix, a short name and the citation."""

    prefix: str
    name: str
    citation: str


SOURCES = (
    Source("H", "Humbatova et al.", "Humbatova, Jahangirova, Bavota, Riccio, Stocco, Tonella: "
           "Taxonomy of Real Faults in Deep Learning Systems, ICSE 2020 (arXiv 1910.11015)"),
    Source("T", "TrainCheck", "Jiang, Zhou, Xu, Liu, Xu, Huang: Training with Confidence: "
           "Catching Silent Errors in Deep Learning Training with Automated Proactive Checks, "
           "OSDI 2025 (arXiv 2506.14813)"),
    Source("D", "DeepFD", "Cao, Li, Chen, Wen, Tian, Wu, Cheung: DeepFD: Automated Fault "
           "Diagnosis and Localization for Deep Learning Programs, ICSE 2022 (arXiv 2205.01938)"),
    Source("A", "AUTOTRAINER", "Zhang, Zhai, Ma, Shen: AUTOTRAINER: An Automatic DNN Training "
           "Problem Detection and Repair System, ICSE 2021"),
    Source("J", "Jahangirova et al.", "Jahangirova, Humbatova, Kim, Yoo, Tonella: Real Faults in "
           "Deep Learning Fault Benchmarks: How Real Are They?, arXiv 2412.16336 (2024)"),
    Source("L", "LLM-era incidents", "documented bugs of decoder-only language-model training "
           "(public issue and pull-request threads of the major training libraries)"),
)


@dataclass(frozen=True)
class Leaf:
    """One leaf (fault type, error, problem) of a source.

    ``group`` is the Humbatova branch (Model, Tensors & Inputs, Training, GPU Usage, API) or
    AUTOTRAINER's ``problem`` / ``extension``; ``scope`` is ``in``, ``distributed`` or ``out``;
    ``faults`` is how many of the 314 eligible faults Jahangirova et al. typed with it (types
    with at least 3)."""

    key: str
    group: str
    name: str
    scope: str = "in"
    faults: int | None = None

    @property
    def source(self) -> str:
        return self.key.split(".", 1)[0]

    @property
    def folded(self) -> str:
        """The key with Humbatova's preprocessing examples folded into their two parents
        (``H.training.preproc_missing``, ``H.training.preproc_wrong``), as her replication
        package counts leaves; every other key is itself."""
        parts = self.key.split(".")
        return ".".join(parts[:3]) if parts[1:3] in (["training", "preproc_missing"],
                                                     ["training", "preproc_wrong"]) else self.key


LEAVES = (
    Leaf("H.model.activation.wrong_type", "Model", "wrong type of activation function"),
    Leaf("H.model.activation.missing_softmax", "Model", "missing softmax activation function"),
    Leaf("H.model.activation.missing_relu", "Model", "missing ReLU activation function"),
    Leaf("H.model.layer_props.wrong_linear_input_size", "Model", "wrong input sample size for linear layer"),
    Leaf("H.model.layer_props.wrong_input_shape", "Model", "wrong defined input shape"),
    Leaf("H.model.layer_props.wrong_output_shape", "Model", "wrong defined output shape"),
    Leaf("H.model.layer_props.wrong_input_output_shape", "Model", "wrong defined input and output shape"),
    Leaf("H.model.layer_props.wrong_filter_size", "Model", "wrong filter size for a convolutional layer"),
    Leaf("H.model.layer_props.missing_bias", "Model", "bias needed in a layer"),
    Leaf("H.model.layer_props.suboptimal_neurons", "Model", "suboptimal number of neurons in a layer"),
    Leaf("H.model.layer_props.wrong_pooling", "Model", "wrong amount and type of pooling in convolutional layer"),
    Leaf("H.model.layer_props.dimension_mismatch", "Model", "layers' dimensions mismatch"),
    Leaf("H.model.layers.missing_dropout", "Model", "missing dropout layer"),
    Leaf("H.model.layers.missing_normalisation", "Model", "missing normalisation layer"),
    Leaf("H.model.layers.missing_softmax_layer", "Model", "missing softmax layer"),
    Leaf("H.model.layers.redundant_softmax", "Model", "redundant softmax layer"),
    Leaf("H.model.layers.wrong_layer_type", "Model", "wrong layer type"),
    Leaf("H.model.layers.missing_flatten", "Model", "missing flatten layer"),
    Leaf("H.model.layers.missing_dense", "Model", "missing dense layer"),
    Leaf("H.model.layers.missing_avg_pooling", "Model", "missing average pooling layer"),
    Leaf("H.model.layers.wrong_pooling_type", "Model", "wrong type of pooling layer"),
    Leaf("H.model.type.wrong_model_init", "Model", "wrong model initialisation"),
    Leaf("H.model.type.wrong_weights_init", "Model", "wrong weights initialisation"),
    Leaf("H.model.type.wrong_model_selection", "Model", "wrong selection of model"),
    Leaf("H.model.type.wrong_architecture", "Model", "wrong network architecture"),
    Leaf("H.model.type.suboptimal_structure", "Model", "suboptimal network structure"),
    Leaf("H.model.type.multiple_init_cnn", "Model", "multiple initialisations of CNN"),
    Leaf("H.tensors.input.wrong_format", "Tensors & Inputs", "wrong input format"),
    Leaf("H.tensors.input.wrong_format_rnn", "Tensors & Inputs", "wrong input format for RNN"),
    Leaf("H.tensors.input.wrong_weights_format", "Tensors & Inputs", "wrong format of passed weights"),
    Leaf("H.tensors.input.incompatible_tensor_type", "Tensors & Inputs", "incompatible tensor type"),
    Leaf("H.tensors.input.wrong_shape_method", "Tensors & Inputs", "wrong shape of input data for a method"),
    Leaf("H.tensors.input.wrong_shape_layer", "Tensors & Inputs", "wrong shape of input data for a layer"),
    Leaf("H.tensors.input.wrong_shape", "Tensors & Inputs", "wrong shape of input data"),
    Leaf("H.tensors.input.wrong_type_method", "Tensors & Inputs", "wrong type of input data for a method"),
    Leaf("H.tensors.input.wrong_type_layer", "Tensors & Inputs", "wrong type of input data for a layer"),
    Leaf("H.tensors.input.wrong_type", "Tensors & Inputs", "wrong type of input data"),
    Leaf("H.tensors.shape.missing_squeeze", "Tensors & Inputs", "wrong tensor shape (missing squeeze)"),
    Leaf("H.tensors.shape.wrong_indexing", "Tensors & Inputs", "wrong tensor shape (wrong indexing)"),
    Leaf("H.tensors.shape.wrong_output_padding", "Tensors & Inputs", "wrong tensor shape (wrong output padding)"),
    Leaf("H.tensors.shape.other", "Tensors & Inputs", "wrong tensor shape (other)"),
    Leaf("H.tensors.shape.mismatch", "Tensors & Inputs", "tensor shape mismatch"),
    Leaf("H.training.preproc_missing.subsampling", "Training", "missing preprocessing step: subsampling"),
    Leaf("H.training.preproc_missing.normalisation", "Training", "missing preprocessing step: normalisation"),
    Leaf("H.training.preproc_missing.input_scaling", "Training", "missing preprocessing step: input scaling"),
    Leaf("H.training.preproc_missing.image_resize", "Training", "missing preprocessing step: resize of the images"),
    Leaf("H.training.preproc_missing.oversampling", "Training", "missing preprocessing step: oversampling"),
    Leaf("H.training.preproc_missing.categorical_encoding", "Training", "missing preprocessing step: encoding of categorical data"),
    Leaf("H.training.preproc_missing.padding", "Training", "missing preprocessing step: padding"),
    Leaf("H.training.preproc_missing.shuffling", "Training", "missing preprocessing step: data shuffling"),
    Leaf("H.training.preproc_missing.interpolation", "Training", "missing preprocessing step: interpolation"),
    Leaf("H.training.preproc_wrong.pixel_encoding", "Training", "wrong preprocessing step: pixel encoding"),
    Leaf("H.training.preproc_wrong.padding", "Training", "wrong preprocessing step: padding"),
    Leaf("H.training.preproc_wrong.text_segmentation", "Training", "wrong preprocessing step: text segmentation"),
    Leaf("H.training.preproc_wrong.normalisation", "Training", "wrong preprocessing step: normalisation"),
    Leaf("H.training.preproc_wrong.positional_encoding", "Training", "wrong preprocessing step: positional encoding"),
    Leaf("H.training.preproc_wrong.character_encoding", "Training", "wrong preprocessing step: character encoding"),
    Leaf("H.training.data.wrong_labels", "Training", "wrong labels for training data"),
    Leaf("H.training.data.wrong_feature_selection", "Training", "wrong selection of features"),
    Leaf("H.training.data.unbalanced", "Training", "unbalanced training data"),
    Leaf("H.training.data.not_enough", "Training", "not enough training data"),
    Leaf("H.training.data.low_quality", "Training", "low quality training data"),
    Leaf("H.training.data.overlapping_classes", "Training", "overlapping output classes in training data"),
    Leaf("H.training.data.too_many_categories", "Training", "too many output categories"),
    Leaf("H.training.data.small_feature_range", "Training", "small range of values for a feature"),
    Leaf("H.training.data.discarding_features", "Training", "discarding important features"),
    Leaf("H.training.process.memory_management", "Training", "wrong management of memory resources"),
    Leaf("H.training.process.missing_checkpoint", "Training", "reference to non-existing checkpoint"),
    Leaf("H.training.process.missing_augmentation", "Training", "missing data augmentation"),
    Leaf("H.training.process.redundant_augmentation", "Training", "redundant data augmentation"),
    Leaf("H.training.optimiser.wrong_optimiser", "Training", "wrong optimisation function"),
    Leaf("H.training.optimiser.adam_eps_too_low", "Training", "epsilon for Adam optimiser too low"),
    Leaf("H.training.loss.wrong_calculation", "Training", "wrong loss function calculation"),
    Leaf("H.training.loss.missing_masking", "Training", "missing masking of invalid values to zero"),
    Leaf("H.training.loss.wrong_loss_function", "Training", "wrong selection of loss function"),
    Leaf("H.training.loss.missing_loss", "Training", "missing loss function"),
    Leaf("H.training.validation.missing_validation_set", "Training", "missing validation set"),
    Leaf("H.training.validation.wrong_metric", "Training", "wrong performance metric"),
    Leaf("H.training.validation.wrong_split", "Training", "incorrect train/test data split"),
    Leaf("H.training.hparams.suboptimal_tuning", "Training", "suboptimal hyperparameters tuning"),
    Leaf("H.training.hparams.suboptimal_lr", "Training", "suboptimal learning rate"),
    Leaf("H.training.hparams.batching_required", "Training", "data batching required"),
    Leaf("H.training.hparams.suboptimal_epochs", "Training", "suboptimal number of epochs"),
    Leaf("H.training.hparams.suboptimal_batch_size", "Training", "suboptimal batch size"),
    Leaf("H.training.hparams.wrong_batching", "Training", "wrongly implemented data batching"),
    Leaf("H.training.hparams.missing_regularisation", "Training", "missing regularisation (loss and weight)"),
    Leaf("H.gpu.missing_destination_device", "GPU Usage", "missing destination GPU device"),
    Leaf("H.gpu.incorrect_state_sharing", "GPU Usage", "incorrect state sharing"),
    Leaf("H.gpu.wrong_device_reference", "GPU Usage", "wrong reference to GPU device"),
    Leaf("H.gpu.unsupported_cuda_op", "GPU Usage", "calling unsupported operations on CUDA tensors"),
    Leaf("H.gpu.cuda_conversion_in_loop", "GPU Usage", "conversion to CUDA tensor inside the training/test loop"),
    Leaf("H.gpu.wrong_transfer_function", "GPU Usage", "wrongly implemented data transfer function"),
    Leaf("H.gpu.missing_transfer", "GPU Usage", "missing transfer of data to GPU"),
    Leaf("H.gpu.wrong_tensor_transfer", "GPU Usage", "wrong tensor transfer to GPU"),
    Leaf("H.gpu.gpu_instead_of_cpu", "GPU Usage", "GPU tensor is used instead of CPU tensor"),
    Leaf("H.gpu.data_parallelism", "GPU Usage", "wrong data parallelism on GPUs", scope="distributed"),
    Leaf("H.api.shuffle_position", "API", "wrong position of data shuffle operation"),
    Leaf("H.api.wrong_api_usage", "API", "wrong API usage"),
    Leaf("H.api.missing_api_call", "API", "missing API call"),
    # TrainCheck's named silent errors (the 2 it misses are not named), by issue or thread
    Leaf("T.mmpretrain-702", "", "a freeze applied only by the model's train(), which the run "
         "never calls after configuring it"),
    Leaf("T.pytorch-51800", "", "spectral_norm first used in eval mode: never initialised"),
    Leaf("T.pytorch-forum-84911", "", "every major layer frozen by mistake (and images resized "
         "far too large)"),
    Leaf("T.stackoverflow-60335387", "", "optimizer.zero_grad() missing"),
    Leaf("T.stackoverflow-67180955", "", "DataLoader workers start from one copied RNG state"),
    Leaf("T.transformers-17877", "", "weight initialisation repeated, slowing start-up"),
    Leaf("T.transformers-33844", "", "an attention path ignores self.training: dropout stays "
         "on in evaluation"),
    Leaf("T.transformers-34204", "", "a batch of images silently collapsed into one example"),
    Leaf("T.x-jxmnop-ddp-out-of-sync", "", "the unwrapped module trained instead of its DDP "
         "wrapper", scope="distributed"),
    Leaf("T.pytorch-104336", "", "model moved after DDP wrapping: gradient hooks bound to "
         "replaced parameters", scope="distributed"),
    Leaf("T.deepspeed-1801", "", "bf16 gradient clipping differs across tensor-parallel ranks",
         scope="distributed"),
    Leaf("T.deepspeed-5794", "", "uneven MoE routing makes all_to_all calls disagree",
         scope="distributed"),
    Leaf("T.baichuan2-86", "", "GPU peer-to-peer transfers lose data (hardware)", scope="out"),
    Leaf("T.pytorch-84803", "", "GPU peer-to-peer transfers lose data (hardware)", scope="out"),
    Leaf("T.pytorch-96600", "", "GPU peer-to-peer transfers lose data (hardware)", scope="out"),
    Leaf("T.lightning-thunder-725", "", "a compiler transform stops applying autocast",
         scope="out"),
    Leaf("T.pytorch-115607", "", "a torch._dynamo bug stops parameter updates", scope="out"),
    Leaf("T.transformers-23723", "", "generation length computed before prompt trimming",
         scope="out"),
    # DeepFD's fault types
    Leaf("D.opt", "", "optimiser swapped for another"),
    Leaf("D.lr", "", "learning rate far too high or far too low"),
    Leaf("D.act", "", "last-layer activation that no longer fits the loss"),
    Leaf("D.loss", "", "classification loss exchanged with a regression loss, or the reverse"),
    Leaf("D.epoch", "", "far too few epochs"),
    # AUTOTRAINER's five problems, and the labels its current code adds
    Leaf("A.vanishing_gradient", "problem", "vanishing gradient"),
    Leaf("A.exploding_gradient", "problem", "exploding gradient"),
    Leaf("A.dying_relu", "problem", "dying ReLU"),
    Leaf("A.oscillating_loss", "problem", "oscillating loss"),
    Leaf("A.slow_convergence", "problem", "slow convergence"),
    Leaf("A.activation_issue", "extension", "output activation does not fit the loss"),
    Leaf("A.loss_issue", "extension", "loss does not fit the output or task"),
    Leaf("A.abnormal_data", "extension", "abnormal input data"),
    # Jahangirova et al.: types with at least 3 of the 314 eligible faults, then rarer codes
    Leaf("J.CPP", "", "wrong data preprocessing", faults=93),
    Leaf("J.HNE", "", "wrong number of epochs", faults=74),
    Leaf("J.ACH", "", "wrong activation function", faults=68),
    Leaf("J.LCH", "", "wrong loss function", faults=43),
    Leaf("J.LIS", "", "wrong layer input shape", faults=33),
    Leaf("J.TWS", "", "wrong tensor shape", faults=27),
    Leaf("J.LRM", "", "missing layer", faults=26),
    Leaf("J.LCN", "", "wrong number of neurons in a layer", faults=22),
    Leaf("J.HLR", "", "wrong learning rate", faults=18),
    Leaf("J.HBS", "", "wrong batch size", faults=17),
    Leaf("J.OCH", "", "wrong optimisation function", faults=13),
    Leaf("J.TRD", "", "not enough training data", faults=13),
    Leaf("J.IWF", "", "wrong input format", faults=10),
    Leaf("J.MWA", "", "wrong model architecture", faults=8),
    Leaf("J.LWC", "", "wrong loss function calculation", faults=6),
    Leaf("J.IWS", "", "wrong shape of input data", faults=6),
    Leaf("J.LCF", "", "wrong filter size in a convolutional layer", faults=6),
    Leaf("J.WCI", "", "wrong weights initialisation", faults=4),
    Leaf("J.PMC", "", "wrong performance metric", faults=4),
    Leaf("J.LAD", "", "redundant layer", faults=4),
    Leaf("J.RCD", "", "wrong dropout rate", faults=4),
    Leaf("J.LWS", "", "wrong layer", faults=3),
    Leaf("J.HAE", "", "Adam epsilon too low"),
    Leaf("J.MMR", "", "memory management"),
    Leaf("J.IDS", "", "wrong train/test split"),
    Leaf("J.APW", "", "wrong API usage"),
    Leaf("J.VRM", "", "missing validation set"),
    Leaf("J.HBI", "", "wrongly implemented batching"),
    # LLM-era training bugs with public incidents
    Leaf("L.grad_accum_token_norm", "", "loss normalised per micro-batch under gradient "
         "accumulation with variable token counts"),
    Leaf("L.labels_double_shift", "", "labels shifted twice"),
    Leaf("L.labels_not_shifted", "", "labels not shifted"),
    Leaf("L.missing_causal_mask", "", "missing causal mask"),
    Leaf("L.left_pad_positions", "", "position ids that ignore left padding"),
    Leaf("L.tied_embeddings_broken", "", "tied embeddings untied"),
    Leaf("L.loss_on_padding", "", "loss computed on padding tokens"),
    Leaf("L.attention_scale", "", "attention without (or with the wrong) 1/sqrt(d) scale"),
    Leaf("L.bf16_precision", "", "bf16 where precision is needed"),
    Leaf("L.eos_masked", "", "EOS masked out of the loss"),
    Leaf("L.bos_wrong", "", "BOS doubled or missing"),
)
BY_KEY = {leaf.key: leaf for leaf in LEAVES}


def declaration_problem(key: str, value: str) -> str | None:
    """What is wrong with one ``Bug.taxonomy`` entry, or None: an unknown key (with a close
    match), or a value that is neither ``"literal"`` nor ``"partial: <how it differs>"``."""
    if key not in BY_KEY:
        import difflib  # here: only a wrong key pays for it

        close = difflib.get_close_matches(key, BY_KEY, n=1)
        return f"unknown taxonomy key {key!r}" + (f" (did you mean {close[0]!r}?)" if close
                                                    else "")
    if value != LITERAL and not (value.startswith(PARTIAL) and value[len(PARTIAL):].strip()):
        return (f"taxonomy {key}: {value!r} is neither 'literal' nor 'partial: <how the "
                "plant differs>'")
    return None
