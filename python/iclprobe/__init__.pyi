# Type stubs of the iclprobe Python module (python/iclprobe/__init__.py documents each call).
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np
import numpy.typing as npt

__version__: str
git_commit: str

ArrayLike = Union[npt.NDArray[np.float32], npt.NDArray[np.float64], Any]

def thread_count(threads: int) -> int: ...

def targets(
    x: ArrayLike,
    y: ArrayLike,
    ridge_lambda: float = ...,
    learners: Union[str, Iterable[str]] = ...,
    noise: float = ...,
    w_scale: float = ...,
) -> Dict[str, npt.NDArray[np.float64]]: ...

class ProbeResult:
    table: Dict[str, Any]
    selectivity: Dict[str, Any]
    per_prompt_sse: npt.NDArray[np.float64]
    per_prompt_sst: npt.NDArray[np.float64]
    roles: List[npt.NDArray[np.uint8]]
    request: Dict[str, Any]
    layers: List[int]
    ks: List[int]
    pooling: List[Dict[str, Any]]
    threads: int
    def weights(
        self,
        target: Optional[str] = ...,
        layer: Optional[int] = ...,
        k: Optional[int] = ...,
        seed: int = ...,
        source: str = ...,
    ) -> Dict[str, Any]: ...
    def onsets(
        self, k: int, threshold: float = ..., relative: float = ..., margin: float = ...
    ) -> List[Dict[str, Any]]: ...
    def metric(
        self, target: str, metric: str = ..., probe: str = ..., source: str = ...
    ) -> npt.NDArray[np.float64]: ...
    def save(self, path: str, force: bool = ...) -> None: ...

def probe(
    hidden: ArrayLike,
    targets: Union[ArrayLike, Mapping[str, ArrayLike]],
    *,
    probes: Union[str, Sequence[str]] = ...,
    positions: Optional[str] = ...,
    at: str = ...,
    layers: Optional[Sequence[int]] = ...,
    ks: Optional[Sequence[int]] = ...,
    controls: Union[None, Mapping[str, ArrayLike], Sequence[ArrayLike]] = ...,
    lambdas: Union[str, Sequence[float], None] = ...,
    split: Tuple[float, float, float] = ...,
    seed: int = ...,
    seeds: int = ...,
    bootstrap: int = ...,
    shuffle_control: bool = ...,
    pooling: str = ...,
    mlp_hidden: int = ...,
    lr: float = ...,
    epochs: int = ...,
    patience: int = ...,
    batch: int = ...,
    codelength: bool = ...,
    codelength_blocks: Optional[Sequence[float]] = ...,
    name: str = ...,
    threads: int = ...,
    progress: Optional[Callable[[float, float], None]] = ...,
) -> ProbeResult: ...

def ridge_probe(
    hidden: ArrayLike,
    targets: Union[ArrayLike, Mapping[str, ArrayLike]],
    *,
    layers: Optional[Sequence[int]] = ...,
    ks: Optional[Sequence[int]] = ...,
    controls: Union[None, Mapping[str, ArrayLike], Sequence[ArrayLike]] = ...,
    lambdas: Union[str, Sequence[float], None] = ...,
    split: Tuple[float, float, float] = ...,
    seed: int = ...,
    seeds: int = ...,
    bootstrap: int = ...,
    shuffle_control: bool = ...,
    threads: int = ...,
    progress: Optional[Callable[[float, float], None]] = ...,
) -> ProbeResult: ...

def extract(
    checkpoint: str,
    out: str,
    *,
    prompts: int = ...,
    seed: int = ...,
    layers: Optional[Sequence[int]] = ...,
    positions: str = ...,
    ridge_lambda: float = ...,
    learner_targets: Iterable[str] = ...,
    n: Optional[int] = ...,
    noise: Optional[float] = ...,
    w_scale: Optional[float] = ...,
    float16: bool = ...,
    compress: bool = ...,
    batch: int = ...,
    force: bool = ...,
    resume: bool = ...,
    threads: int = ...,
    progress: Optional[Callable[[float, float], None]] = ...,
) -> "Activations": ...

class Activations:
    path: str
    prompts: int
    layers: List[int]
    positions: str
    targets: List[str]
    model_config: Dict[str, Any]
    task_config: Dict[str, Any]
    seed: int
    checkpoint_sha256: str
    def __init__(self, path: str) -> None: ...
    def hidden(self, layer: int) -> npt.NDArray[np.float32]: ...
    def target(self, name: str) -> npt.NDArray[np.float64]: ...
    def read_prompts(self) -> Dict[str, npt.NDArray[np.float64]]: ...
    def states_after_k(
        self, layers: Optional[Sequence[int]] = ..., ks: Optional[Sequence[int]] = ...
    ) -> npt.NDArray[np.float32]: ...

class Transformer:
    path: str
    model_config: Dict[str, Any]
    train_config: Dict[str, Any]
    step: int
    def __init__(self, path: str) -> None: ...
    @classmethod
    def load(cls, path: str) -> "Transformer": ...
    def forward(
        self,
        x: ArrayLike,
        y: ArrayLike,
        return_hidden: bool = ...,
        threads: int = ...,
        progress: Optional[Callable[[float, float], None]] = ...,
    ) -> Tuple[npt.NDArray[np.float32], Optional[npt.NDArray[np.float32]]]: ...

class Probes:
    path: str
    targets: List[str]
    probes: List[str]
    sources: List[str]
    layers: List[int]
    ks: List[int]
    seeds: int
    def __init__(self, path: str) -> None: ...
    def metric(
        self, target: str, metric: str = ..., probe: str = ..., source: str = ...
    ) -> npt.NDArray[np.float64]: ...
    def onsets(
        self, k: int, threshold: float = ..., relative: float = ..., margin: float = ...
    ) -> List[Dict[str, Any]]: ...
    def weights(
        self, target: str, layer: int, k: int, seed: int = ..., source: str = ...
    ) -> Dict[str, Any]: ...

def onsets(
    results: Union[ProbeResult, Probes],
    k: int,
    threshold: float = ...,
    relative: float = ...,
    margin: float = ...,
) -> List[Dict[str, Any]]: ...
def family(
    results: Union[Mapping[str, Union[ProbeResult, Probes]], Sequence[Union[ProbeResult, Probes]]],
    k: int,
    threshold: float = ...,
    relative: float = ...,
    margin: float = ...,
) -> Dict[str, Any]: ...
class Results:
    path: str
    kind: str
    attrs: Dict[str, Any]
    table: Dict[str, Any]
    def __init__(self, path: str) -> None: ...
    def datasets(self) -> List[str]: ...
    def read(self, name: str) -> npt.NDArray[np.float64]: ...
    def labels(self, name: str) -> List[str]: ...

def open(path: str) -> Union[Activations, Probes, Transformer, Results]: ...
