import datetime

from google.protobuf import duration_pb2 as _duration_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class TaintEffect(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    TAINT_EFFECT_UNSPECIFIED: _ClassVar[TaintEffect]
    TAINT_EFFECT_NO_SCHEDULE: _ClassVar[TaintEffect]
    TAINT_EFFECT_PREFER_NO_SCHEDULE: _ClassVar[TaintEffect]
    TAINT_EFFECT_NO_EXECUTE: _ClassVar[TaintEffect]

class TolerationOperator(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    TOLERATION_OPERATOR_UNSPECIFIED: _ClassVar[TolerationOperator]
    TOLERATION_OPERATOR_EQUAL: _ClassVar[TolerationOperator]
    TOLERATION_OPERATOR_EXISTS: _ClassVar[TolerationOperator]

class LabelOperator(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    LABEL_OPERATOR_UNSPECIFIED: _ClassVar[LabelOperator]
    LABEL_OPERATOR_IN: _ClassVar[LabelOperator]
    LABEL_OPERATOR_NOT_IN: _ClassVar[LabelOperator]
    LABEL_OPERATOR_EXISTS: _ClassVar[LabelOperator]
    LABEL_OPERATOR_DOES_NOT_EXIST: _ClassVar[LabelOperator]
    LABEL_OPERATOR_GT: _ClassVar[LabelOperator]
    LABEL_OPERATOR_LT: _ClassVar[LabelOperator]

class NodePowerState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    NODE_POWER_STATE_UNSPECIFIED: _ClassVar[NodePowerState]
    NODE_POWER_STATE_UP: _ClassVar[NodePowerState]
    NODE_POWER_STATE_SUSPENDED: _ClassVar[NodePowerState]

class EnergyBasis(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ENERGY_BASIS_UNSPECIFIED: _ClassVar[EnergyBasis]
    ENERGY_BASIS_DRAW: _ClassVar[EnergyBasis]
    ENERGY_BASIS_WASTE: _ClassVar[EnergyBasis]

class FairnessMode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    FAIRNESS_MODE_UNSPECIFIED: _ClassVar[FairnessMode]
    FAIRNESS_MODE_WEIGHTED_SUM: _ClassVar[FairnessMode]
    FAIRNESS_MODE_MAX_MIN: _ClassVar[FairnessMode]
    FAIRNESS_MODE_PROPORTIONAL: _ClassVar[FairnessMode]
    FAIRNESS_MODE_DRF: _ClassVar[FairnessMode]
    FAIRNESS_MODE_FINISH_TIME: _ClassVar[FairnessMode]

class FairnessScope(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    FAIRNESS_SCOPE_UNSPECIFIED: _ClassVar[FairnessScope]
    FAIRNESS_SCOPE_JOB: _ClassVar[FairnessScope]
    FAIRNESS_SCOPE_TENANT: _ClassVar[FairnessScope]

class Backend(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    BACKEND_UNSPECIFIED: _ClassVar[Backend]
    BACKEND_AUTO: _ClassVar[Backend]
    BACKEND_CPSAT: _ClassVar[Backend]
    BACKEND_HEURISTIC: _ClassVar[Backend]
    BACKEND_AGGREGATE: _ClassVar[Backend]
    BACKEND_HIGHS: _ClassVar[Backend]
    BACKEND_PYOMO: _ClassVar[Backend]
    BACKEND_DECOMPOSED: _ClassVar[Backend]

class JobState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    JOB_STATE_UNSPECIFIED: _ClassVar[JobState]
    JOB_STATE_RUNNING: _ClassVar[JobState]
    JOB_STATE_QUEUED: _ClassVar[JobState]

class QueueReason(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    QUEUE_REASON_UNSPECIFIED: _ClassVar[QueueReason]
    QUEUE_REASON_NO_FEASIBLE_CONFIGURATION: _ClassVar[QueueReason]
    QUEUE_REASON_INSUFFICIENT_RESOURCES: _ClassVar[QueueReason]
    QUEUE_REASON_NOT_WORTH_RUNNING: _ClassVar[QueueReason]
    QUEUE_REASON_DEFERRED: _ClassVar[QueueReason]

class PowerActionKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    POWER_ACTION_KIND_UNSPECIFIED: _ClassVar[PowerActionKind]
    POWER_ACTION_KIND_SUSPEND: _ClassVar[PowerActionKind]
    POWER_ACTION_KIND_RESUME: _ClassVar[PowerActionKind]

class Termination(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    TERMINATION_UNSPECIFIED: _ClassVar[Termination]
    TERMINATION_OPTIMAL: _ClassVar[Termination]
    TERMINATION_FEASIBLE: _ClassVar[Termination]
    TERMINATION_FALLBACK: _ClassVar[Termination]
    TERMINATION_INFEASIBLE: _ClassVar[Termination]
TAINT_EFFECT_UNSPECIFIED: TaintEffect
TAINT_EFFECT_NO_SCHEDULE: TaintEffect
TAINT_EFFECT_PREFER_NO_SCHEDULE: TaintEffect
TAINT_EFFECT_NO_EXECUTE: TaintEffect
TOLERATION_OPERATOR_UNSPECIFIED: TolerationOperator
TOLERATION_OPERATOR_EQUAL: TolerationOperator
TOLERATION_OPERATOR_EXISTS: TolerationOperator
LABEL_OPERATOR_UNSPECIFIED: LabelOperator
LABEL_OPERATOR_IN: LabelOperator
LABEL_OPERATOR_NOT_IN: LabelOperator
LABEL_OPERATOR_EXISTS: LabelOperator
LABEL_OPERATOR_DOES_NOT_EXIST: LabelOperator
LABEL_OPERATOR_GT: LabelOperator
LABEL_OPERATOR_LT: LabelOperator
NODE_POWER_STATE_UNSPECIFIED: NodePowerState
NODE_POWER_STATE_UP: NodePowerState
NODE_POWER_STATE_SUSPENDED: NodePowerState
ENERGY_BASIS_UNSPECIFIED: EnergyBasis
ENERGY_BASIS_DRAW: EnergyBasis
ENERGY_BASIS_WASTE: EnergyBasis
FAIRNESS_MODE_UNSPECIFIED: FairnessMode
FAIRNESS_MODE_WEIGHTED_SUM: FairnessMode
FAIRNESS_MODE_MAX_MIN: FairnessMode
FAIRNESS_MODE_PROPORTIONAL: FairnessMode
FAIRNESS_MODE_DRF: FairnessMode
FAIRNESS_MODE_FINISH_TIME: FairnessMode
FAIRNESS_SCOPE_UNSPECIFIED: FairnessScope
FAIRNESS_SCOPE_JOB: FairnessScope
FAIRNESS_SCOPE_TENANT: FairnessScope
BACKEND_UNSPECIFIED: Backend
BACKEND_AUTO: Backend
BACKEND_CPSAT: Backend
BACKEND_HEURISTIC: Backend
BACKEND_AGGREGATE: Backend
BACKEND_HIGHS: Backend
BACKEND_PYOMO: Backend
BACKEND_DECOMPOSED: Backend
JOB_STATE_UNSPECIFIED: JobState
JOB_STATE_RUNNING: JobState
JOB_STATE_QUEUED: JobState
QUEUE_REASON_UNSPECIFIED: QueueReason
QUEUE_REASON_NO_FEASIBLE_CONFIGURATION: QueueReason
QUEUE_REASON_INSUFFICIENT_RESOURCES: QueueReason
QUEUE_REASON_NOT_WORTH_RUNNING: QueueReason
QUEUE_REASON_DEFERRED: QueueReason
POWER_ACTION_KIND_UNSPECIFIED: PowerActionKind
POWER_ACTION_KIND_SUSPEND: PowerActionKind
POWER_ACTION_KIND_RESUME: PowerActionKind
TERMINATION_UNSPECIFIED: Termination
TERMINATION_OPTIMAL: Termination
TERMINATION_FEASIBLE: Termination
TERMINATION_FALLBACK: Termination
TERMINATION_INFEASIBLE: Termination

class GpuType(_message.Message):
    __slots__ = ("name", "memory_gib", "peak_tflops", "memory_bandwidth_gbps", "intra_node_bandwidth_gbps", "tdp_watts", "idle_watts", "sm_clocks_mhz", "mig")
    NAME_FIELD_NUMBER: _ClassVar[int]
    MEMORY_GIB_FIELD_NUMBER: _ClassVar[int]
    PEAK_TFLOPS_FIELD_NUMBER: _ClassVar[int]
    MEMORY_BANDWIDTH_GBPS_FIELD_NUMBER: _ClassVar[int]
    INTRA_NODE_BANDWIDTH_GBPS_FIELD_NUMBER: _ClassVar[int]
    TDP_WATTS_FIELD_NUMBER: _ClassVar[int]
    IDLE_WATTS_FIELD_NUMBER: _ClassVar[int]
    SM_CLOCKS_MHZ_FIELD_NUMBER: _ClassVar[int]
    MIG_FIELD_NUMBER: _ClassVar[int]
    name: str
    memory_gib: float
    peak_tflops: float
    memory_bandwidth_gbps: float
    intra_node_bandwidth_gbps: float
    tdp_watts: float
    idle_watts: float
    sm_clocks_mhz: _containers.RepeatedScalarFieldContainer[int]
    mig: MigGeometry
    def __init__(self, name: _Optional[str] = ..., memory_gib: _Optional[float] = ..., peak_tflops: _Optional[float] = ..., memory_bandwidth_gbps: _Optional[float] = ..., intra_node_bandwidth_gbps: _Optional[float] = ..., tdp_watts: _Optional[float] = ..., idle_watts: _Optional[float] = ..., sm_clocks_mhz: _Optional[_Iterable[int]] = ..., mig: _Optional[_Union[MigGeometry, _Mapping]] = ...) -> None: ...

class MigGeometry(_message.Message):
    __slots__ = ("compute_slices", "memory_slices", "profiles")
    COMPUTE_SLICES_FIELD_NUMBER: _ClassVar[int]
    MEMORY_SLICES_FIELD_NUMBER: _ClassVar[int]
    PROFILES_FIELD_NUMBER: _ClassVar[int]
    compute_slices: int
    memory_slices: int
    profiles: _containers.RepeatedCompositeFieldContainer[MigProfile]
    def __init__(self, compute_slices: _Optional[int] = ..., memory_slices: _Optional[int] = ..., profiles: _Optional[_Iterable[_Union[MigProfile, _Mapping]]] = ...) -> None: ...

class MigProfile(_message.Message):
    __slots__ = ("name", "compute_slices", "memory_slices", "memory_gib", "max_count", "starts", "media_extensions")
    NAME_FIELD_NUMBER: _ClassVar[int]
    COMPUTE_SLICES_FIELD_NUMBER: _ClassVar[int]
    MEMORY_SLICES_FIELD_NUMBER: _ClassVar[int]
    MEMORY_GIB_FIELD_NUMBER: _ClassVar[int]
    MAX_COUNT_FIELD_NUMBER: _ClassVar[int]
    STARTS_FIELD_NUMBER: _ClassVar[int]
    MEDIA_EXTENSIONS_FIELD_NUMBER: _ClassVar[int]
    name: str
    compute_slices: int
    memory_slices: int
    memory_gib: float
    max_count: int
    starts: _containers.RepeatedScalarFieldContainer[int]
    media_extensions: bool
    def __init__(self, name: _Optional[str] = ..., compute_slices: _Optional[int] = ..., memory_slices: _Optional[int] = ..., memory_gib: _Optional[float] = ..., max_count: _Optional[int] = ..., starts: _Optional[_Iterable[int]] = ..., media_extensions: _Optional[bool] = ...) -> None: ...

class Node(_message.Message):
    __slots__ = ("name", "gpu_type", "gpu_count", "unavailable_gpu_indices", "rack", "network_bandwidth_gbps", "mig_layouts", "power_state", "idle_for", "base_watts", "labels", "taints")
    class LabelsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    NAME_FIELD_NUMBER: _ClassVar[int]
    GPU_TYPE_FIELD_NUMBER: _ClassVar[int]
    GPU_COUNT_FIELD_NUMBER: _ClassVar[int]
    UNAVAILABLE_GPU_INDICES_FIELD_NUMBER: _ClassVar[int]
    RACK_FIELD_NUMBER: _ClassVar[int]
    NETWORK_BANDWIDTH_GBPS_FIELD_NUMBER: _ClassVar[int]
    MIG_LAYOUTS_FIELD_NUMBER: _ClassVar[int]
    POWER_STATE_FIELD_NUMBER: _ClassVar[int]
    IDLE_FOR_FIELD_NUMBER: _ClassVar[int]
    BASE_WATTS_FIELD_NUMBER: _ClassVar[int]
    LABELS_FIELD_NUMBER: _ClassVar[int]
    TAINTS_FIELD_NUMBER: _ClassVar[int]
    name: str
    gpu_type: str
    gpu_count: int
    unavailable_gpu_indices: _containers.RepeatedScalarFieldContainer[int]
    rack: str
    network_bandwidth_gbps: float
    mig_layouts: _containers.RepeatedCompositeFieldContainer[MigLayout]
    power_state: NodePowerState
    idle_for: _duration_pb2.Duration
    base_watts: float
    labels: _containers.ScalarMap[str, str]
    taints: _containers.RepeatedCompositeFieldContainer[Taint]
    def __init__(self, name: _Optional[str] = ..., gpu_type: _Optional[str] = ..., gpu_count: _Optional[int] = ..., unavailable_gpu_indices: _Optional[_Iterable[int]] = ..., rack: _Optional[str] = ..., network_bandwidth_gbps: _Optional[float] = ..., mig_layouts: _Optional[_Iterable[_Union[MigLayout, _Mapping]]] = ..., power_state: _Optional[_Union[NodePowerState, str]] = ..., idle_for: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., base_watts: _Optional[float] = ..., labels: _Optional[_Mapping[str, str]] = ..., taints: _Optional[_Iterable[_Union[Taint, _Mapping]]] = ...) -> None: ...

class Taint(_message.Message):
    __slots__ = ("key", "value", "effect")
    KEY_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    EFFECT_FIELD_NUMBER: _ClassVar[int]
    key: str
    value: str
    effect: TaintEffect
    def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ..., effect: _Optional[_Union[TaintEffect, str]] = ...) -> None: ...

class Toleration(_message.Message):
    __slots__ = ("key", "operator", "value", "effect")
    KEY_FIELD_NUMBER: _ClassVar[int]
    OPERATOR_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    EFFECT_FIELD_NUMBER: _ClassVar[int]
    key: str
    operator: TolerationOperator
    value: str
    effect: TaintEffect
    def __init__(self, key: _Optional[str] = ..., operator: _Optional[_Union[TolerationOperator, str]] = ..., value: _Optional[str] = ..., effect: _Optional[_Union[TaintEffect, str]] = ...) -> None: ...

class LabelRequirement(_message.Message):
    __slots__ = ("key", "operator", "values")
    KEY_FIELD_NUMBER: _ClassVar[int]
    OPERATOR_FIELD_NUMBER: _ClassVar[int]
    VALUES_FIELD_NUMBER: _ClassVar[int]
    key: str
    operator: LabelOperator
    values: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, key: _Optional[str] = ..., operator: _Optional[_Union[LabelOperator, str]] = ..., values: _Optional[_Iterable[str]] = ...) -> None: ...

class NodeSelectorTerm(_message.Message):
    __slots__ = ("requirements",)
    REQUIREMENTS_FIELD_NUMBER: _ClassVar[int]
    requirements: _containers.RepeatedCompositeFieldContainer[LabelRequirement]
    def __init__(self, requirements: _Optional[_Iterable[_Union[LabelRequirement, _Mapping]]] = ...) -> None: ...

class PreferredSchedulingTerm(_message.Message):
    __slots__ = ("weight", "preference")
    WEIGHT_FIELD_NUMBER: _ClassVar[int]
    PREFERENCE_FIELD_NUMBER: _ClassVar[int]
    weight: int
    preference: NodeSelectorTerm
    def __init__(self, weight: _Optional[int] = ..., preference: _Optional[_Union[NodeSelectorTerm, _Mapping]] = ...) -> None: ...

class PowerSaving(_message.Message):
    __slots__ = ("enabled", "exclude_nodes", "suspend_after", "resume_time", "suspended_node_watts", "spare_nodes_per_type", "price_node_floor")
    ENABLED_FIELD_NUMBER: _ClassVar[int]
    EXCLUDE_NODES_FIELD_NUMBER: _ClassVar[int]
    SUSPEND_AFTER_FIELD_NUMBER: _ClassVar[int]
    RESUME_TIME_FIELD_NUMBER: _ClassVar[int]
    SUSPENDED_NODE_WATTS_FIELD_NUMBER: _ClassVar[int]
    SPARE_NODES_PER_TYPE_FIELD_NUMBER: _ClassVar[int]
    PRICE_NODE_FLOOR_FIELD_NUMBER: _ClassVar[int]
    enabled: bool
    exclude_nodes: _containers.RepeatedScalarFieldContainer[str]
    suspend_after: _duration_pb2.Duration
    resume_time: _duration_pb2.Duration
    suspended_node_watts: float
    spare_nodes_per_type: int
    price_node_floor: bool
    def __init__(self, enabled: _Optional[bool] = ..., exclude_nodes: _Optional[_Iterable[str]] = ..., suspend_after: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., resume_time: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., suspended_node_watts: _Optional[float] = ..., spare_nodes_per_type: _Optional[int] = ..., price_node_floor: _Optional[bool] = ...) -> None: ...

class MigInstance(_message.Message):
    __slots__ = ("profile", "start", "job")
    PROFILE_FIELD_NUMBER: _ClassVar[int]
    START_FIELD_NUMBER: _ClassVar[int]
    JOB_FIELD_NUMBER: _ClassVar[int]
    profile: str
    start: int
    job: str
    def __init__(self, profile: _Optional[str] = ..., start: _Optional[int] = ..., job: _Optional[str] = ...) -> None: ...

class MigLayout(_message.Message):
    __slots__ = ("gpu_index", "instances")
    GPU_INDEX_FIELD_NUMBER: _ClassVar[int]
    INSTANCES_FIELD_NUMBER: _ClassVar[int]
    gpu_index: int
    instances: _containers.RepeatedCompositeFieldContainer[MigInstance]
    def __init__(self, gpu_index: _Optional[int] = ..., instances: _Optional[_Iterable[_Union[MigInstance, _Mapping]]] = ...) -> None: ...

class RackPowerBudget(_message.Message):
    __slots__ = ("rack", "watts")
    RACK_FIELD_NUMBER: _ClassVar[int]
    WATTS_FIELD_NUMBER: _ClassVar[int]
    rack: str
    watts: float
    def __init__(self, rack: _Optional[str] = ..., watts: _Optional[float] = ...) -> None: ...

class ClusterSnapshot(_message.Message):
    __slots__ = ("gpu_types", "nodes", "power_budget_watts", "rack_power_budgets", "queues", "energy_budget", "power_saving", "grid")
    GPU_TYPES_FIELD_NUMBER: _ClassVar[int]
    NODES_FIELD_NUMBER: _ClassVar[int]
    POWER_BUDGET_WATTS_FIELD_NUMBER: _ClassVar[int]
    RACK_POWER_BUDGETS_FIELD_NUMBER: _ClassVar[int]
    QUEUES_FIELD_NUMBER: _ClassVar[int]
    ENERGY_BUDGET_FIELD_NUMBER: _ClassVar[int]
    POWER_SAVING_FIELD_NUMBER: _ClassVar[int]
    GRID_FIELD_NUMBER: _ClassVar[int]
    gpu_types: _containers.RepeatedCompositeFieldContainer[GpuType]
    nodes: _containers.RepeatedCompositeFieldContainer[Node]
    power_budget_watts: float
    rack_power_budgets: _containers.RepeatedCompositeFieldContainer[RackPowerBudget]
    queues: _containers.RepeatedCompositeFieldContainer[TenantQueue]
    energy_budget: EnergyBudget
    power_saving: PowerSaving
    grid: GridForecast
    def __init__(self, gpu_types: _Optional[_Iterable[_Union[GpuType, _Mapping]]] = ..., nodes: _Optional[_Iterable[_Union[Node, _Mapping]]] = ..., power_budget_watts: _Optional[float] = ..., rack_power_budgets: _Optional[_Iterable[_Union[RackPowerBudget, _Mapping]]] = ..., queues: _Optional[_Iterable[_Union[TenantQueue, _Mapping]]] = ..., energy_budget: _Optional[_Union[EnergyBudget, _Mapping]] = ..., power_saving: _Optional[_Union[PowerSaving, _Mapping]] = ..., grid: _Optional[_Union[GridForecast, _Mapping]] = ...) -> None: ...

class GridForecast(_message.Message):
    __slots__ = ("points", "min_saving", "scale_energy", "saving_per_delay")
    POINTS_FIELD_NUMBER: _ClassVar[int]
    MIN_SAVING_FIELD_NUMBER: _ClassVar[int]
    SCALE_ENERGY_FIELD_NUMBER: _ClassVar[int]
    SAVING_PER_DELAY_FIELD_NUMBER: _ClassVar[int]
    points: _containers.RepeatedCompositeFieldContainer[GridPoint]
    min_saving: float
    scale_energy: bool
    saving_per_delay: float
    def __init__(self, points: _Optional[_Iterable[_Union[GridPoint, _Mapping]]] = ..., min_saving: _Optional[float] = ..., scale_energy: _Optional[bool] = ..., saving_per_delay: _Optional[float] = ...) -> None: ...

class GridPoint(_message.Message):
    __slots__ = ("start", "carbon_g_per_kwh", "price_per_kwh")
    START_FIELD_NUMBER: _ClassVar[int]
    CARBON_G_PER_KWH_FIELD_NUMBER: _ClassVar[int]
    PRICE_PER_KWH_FIELD_NUMBER: _ClassVar[int]
    start: _duration_pb2.Duration
    carbon_g_per_kwh: float
    price_per_kwh: float
    def __init__(self, start: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., carbon_g_per_kwh: _Optional[float] = ..., price_per_kwh: _Optional[float] = ...) -> None: ...

class EnergyBudget(_message.Message):
    __slots__ = ("remaining_joules", "horizon_left")
    REMAINING_JOULES_FIELD_NUMBER: _ClassVar[int]
    HORIZON_LEFT_FIELD_NUMBER: _ClassVar[int]
    remaining_joules: float
    horizon_left: _duration_pb2.Duration
    def __init__(self, remaining_joules: _Optional[float] = ..., horizon_left: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ...) -> None: ...

class ResourceQuota(_message.Message):
    __slots__ = ("resource", "nominal", "borrowing_limit", "lending_limit")
    RESOURCE_FIELD_NUMBER: _ClassVar[int]
    NOMINAL_FIELD_NUMBER: _ClassVar[int]
    BORROWING_LIMIT_FIELD_NUMBER: _ClassVar[int]
    LENDING_LIMIT_FIELD_NUMBER: _ClassVar[int]
    resource: str
    nominal: float
    borrowing_limit: float
    lending_limit: float
    def __init__(self, resource: _Optional[str] = ..., nominal: _Optional[float] = ..., borrowing_limit: _Optional[float] = ..., lending_limit: _Optional[float] = ...) -> None: ...

class AttainedService(_message.Message):
    __slots__ = ("gpu_seconds", "normalized_seconds")
    GPU_SECONDS_FIELD_NUMBER: _ClassVar[int]
    NORMALIZED_SECONDS_FIELD_NUMBER: _ClassVar[int]
    gpu_seconds: float
    normalized_seconds: float
    def __init__(self, gpu_seconds: _Optional[float] = ..., normalized_seconds: _Optional[float] = ...) -> None: ...

class TenantQueue(_message.Message):
    __slots__ = ("name", "cohort", "weight", "quotas", "attained")
    NAME_FIELD_NUMBER: _ClassVar[int]
    COHORT_FIELD_NUMBER: _ClassVar[int]
    WEIGHT_FIELD_NUMBER: _ClassVar[int]
    QUOTAS_FIELD_NUMBER: _ClassVar[int]
    ATTAINED_FIELD_NUMBER: _ClassVar[int]
    name: str
    cohort: str
    weight: float
    quotas: _containers.RepeatedCompositeFieldContainer[ResourceQuota]
    attained: AttainedService
    def __init__(self, name: _Optional[str] = ..., cohort: _Optional[str] = ..., weight: _Optional[float] = ..., quotas: _Optional[_Iterable[_Union[ResourceQuota, _Mapping]]] = ..., attained: _Optional[_Union[AttainedService, _Mapping]] = ...) -> None: ...

class ModelSpec(_message.Message):
    __slots__ = ("parameters", "layers", "hidden_size", "attention_heads", "sequence_length", "global_batch_size")
    PARAMETERS_FIELD_NUMBER: _ClassVar[int]
    LAYERS_FIELD_NUMBER: _ClassVar[int]
    HIDDEN_SIZE_FIELD_NUMBER: _ClassVar[int]
    ATTENTION_HEADS_FIELD_NUMBER: _ClassVar[int]
    SEQUENCE_LENGTH_FIELD_NUMBER: _ClassVar[int]
    GLOBAL_BATCH_SIZE_FIELD_NUMBER: _ClassVar[int]
    parameters: float
    layers: int
    hidden_size: int
    attention_heads: int
    sequence_length: int
    global_batch_size: int
    def __init__(self, parameters: _Optional[float] = ..., layers: _Optional[int] = ..., hidden_size: _Optional[int] = ..., attention_heads: _Optional[int] = ..., sequence_length: _Optional[int] = ..., global_batch_size: _Optional[int] = ...) -> None: ...

class ProfilePoint(_message.Message):
    __slots__ = ("gpu_type", "num_gpus", "tensor_parallel", "pipeline_parallel", "sm_clock_mhz", "samples_per_second", "watts", "memory_per_gpu_gib", "mig_profile")
    GPU_TYPE_FIELD_NUMBER: _ClassVar[int]
    NUM_GPUS_FIELD_NUMBER: _ClassVar[int]
    TENSOR_PARALLEL_FIELD_NUMBER: _ClassVar[int]
    PIPELINE_PARALLEL_FIELD_NUMBER: _ClassVar[int]
    SM_CLOCK_MHZ_FIELD_NUMBER: _ClassVar[int]
    SAMPLES_PER_SECOND_FIELD_NUMBER: _ClassVar[int]
    WATTS_FIELD_NUMBER: _ClassVar[int]
    MEMORY_PER_GPU_GIB_FIELD_NUMBER: _ClassVar[int]
    MIG_PROFILE_FIELD_NUMBER: _ClassVar[int]
    gpu_type: str
    num_gpus: int
    tensor_parallel: int
    pipeline_parallel: int
    sm_clock_mhz: int
    samples_per_second: float
    watts: float
    memory_per_gpu_gib: float
    mig_profile: str
    def __init__(self, gpu_type: _Optional[str] = ..., num_gpus: _Optional[int] = ..., tensor_parallel: _Optional[int] = ..., pipeline_parallel: _Optional[int] = ..., sm_clock_mhz: _Optional[int] = ..., samples_per_second: _Optional[float] = ..., watts: _Optional[float] = ..., memory_per_gpu_gib: _Optional[float] = ..., mig_profile: _Optional[str] = ...) -> None: ...

class ThroughputProfile(_message.Message):
    __slots__ = ("points",)
    POINTS_FIELD_NUMBER: _ClassVar[int]
    points: _containers.RepeatedCompositeFieldContainer[ProfilePoint]
    def __init__(self, points: _Optional[_Iterable[_Union[ProfilePoint, _Mapping]]] = ...) -> None: ...

class GpuSlice(_message.Message):
    __slots__ = ("node", "gpu_indices")
    NODE_FIELD_NUMBER: _ClassVar[int]
    GPU_INDICES_FIELD_NUMBER: _ClassVar[int]
    node: str
    gpu_indices: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, node: _Optional[str] = ..., gpu_indices: _Optional[_Iterable[int]] = ...) -> None: ...

class Allocation(_message.Message):
    __slots__ = ("gpu_type", "data_parallel", "tensor_parallel", "pipeline_parallel", "sm_clock_mhz", "placement", "mig_instance", "observed_watts")
    GPU_TYPE_FIELD_NUMBER: _ClassVar[int]
    DATA_PARALLEL_FIELD_NUMBER: _ClassVar[int]
    TENSOR_PARALLEL_FIELD_NUMBER: _ClassVar[int]
    PIPELINE_PARALLEL_FIELD_NUMBER: _ClassVar[int]
    SM_CLOCK_MHZ_FIELD_NUMBER: _ClassVar[int]
    PLACEMENT_FIELD_NUMBER: _ClassVar[int]
    MIG_INSTANCE_FIELD_NUMBER: _ClassVar[int]
    OBSERVED_WATTS_FIELD_NUMBER: _ClassVar[int]
    gpu_type: str
    data_parallel: int
    tensor_parallel: int
    pipeline_parallel: int
    sm_clock_mhz: int
    placement: _containers.RepeatedCompositeFieldContainer[GpuSlice]
    mig_instance: MigInstance
    observed_watts: float
    def __init__(self, gpu_type: _Optional[str] = ..., data_parallel: _Optional[int] = ..., tensor_parallel: _Optional[int] = ..., pipeline_parallel: _Optional[int] = ..., sm_clock_mhz: _Optional[int] = ..., placement: _Optional[_Iterable[_Union[GpuSlice, _Mapping]]] = ..., mig_instance: _Optional[_Union[MigInstance, _Mapping]] = ..., observed_watts: _Optional[float] = ...) -> None: ...

class SliceRequest(_message.Message):
    __slots__ = ("allow", "smallest_profile", "largest_profile")
    ALLOW_FIELD_NUMBER: _ClassVar[int]
    SMALLEST_PROFILE_FIELD_NUMBER: _ClassVar[int]
    LARGEST_PROFILE_FIELD_NUMBER: _ClassVar[int]
    allow: bool
    smallest_profile: str
    largest_profile: str
    def __init__(self, allow: _Optional[bool] = ..., smallest_profile: _Optional[str] = ..., largest_profile: _Optional[str] = ...) -> None: ...

class Job(_message.Message):
    __slots__ = ("name", "tenant", "weight", "model", "profile", "min_gpus", "max_gpus", "allowed_gpu_types", "remaining_samples", "time_to_deadline", "current_allocation", "preemptible", "attained", "age", "slices", "max_deferral", "excluded_nodes", "node_selector", "tolerations", "node_preferences")
    NAME_FIELD_NUMBER: _ClassVar[int]
    TENANT_FIELD_NUMBER: _ClassVar[int]
    WEIGHT_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    PROFILE_FIELD_NUMBER: _ClassVar[int]
    MIN_GPUS_FIELD_NUMBER: _ClassVar[int]
    MAX_GPUS_FIELD_NUMBER: _ClassVar[int]
    ALLOWED_GPU_TYPES_FIELD_NUMBER: _ClassVar[int]
    REMAINING_SAMPLES_FIELD_NUMBER: _ClassVar[int]
    TIME_TO_DEADLINE_FIELD_NUMBER: _ClassVar[int]
    CURRENT_ALLOCATION_FIELD_NUMBER: _ClassVar[int]
    PREEMPTIBLE_FIELD_NUMBER: _ClassVar[int]
    ATTAINED_FIELD_NUMBER: _ClassVar[int]
    AGE_FIELD_NUMBER: _ClassVar[int]
    SLICES_FIELD_NUMBER: _ClassVar[int]
    MAX_DEFERRAL_FIELD_NUMBER: _ClassVar[int]
    EXCLUDED_NODES_FIELD_NUMBER: _ClassVar[int]
    NODE_SELECTOR_FIELD_NUMBER: _ClassVar[int]
    TOLERATIONS_FIELD_NUMBER: _ClassVar[int]
    NODE_PREFERENCES_FIELD_NUMBER: _ClassVar[int]
    name: str
    tenant: str
    weight: float
    model: ModelSpec
    profile: ThroughputProfile
    min_gpus: int
    max_gpus: int
    allowed_gpu_types: _containers.RepeatedScalarFieldContainer[str]
    remaining_samples: float
    time_to_deadline: _duration_pb2.Duration
    current_allocation: Allocation
    preemptible: bool
    attained: AttainedService
    age: _duration_pb2.Duration
    slices: SliceRequest
    max_deferral: _duration_pb2.Duration
    excluded_nodes: _containers.RepeatedScalarFieldContainer[str]
    node_selector: _containers.RepeatedCompositeFieldContainer[NodeSelectorTerm]
    tolerations: _containers.RepeatedCompositeFieldContainer[Toleration]
    node_preferences: _containers.RepeatedCompositeFieldContainer[PreferredSchedulingTerm]
    def __init__(self, name: _Optional[str] = ..., tenant: _Optional[str] = ..., weight: _Optional[float] = ..., model: _Optional[_Union[ModelSpec, _Mapping]] = ..., profile: _Optional[_Union[ThroughputProfile, _Mapping]] = ..., min_gpus: _Optional[int] = ..., max_gpus: _Optional[int] = ..., allowed_gpu_types: _Optional[_Iterable[str]] = ..., remaining_samples: _Optional[float] = ..., time_to_deadline: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., current_allocation: _Optional[_Union[Allocation, _Mapping]] = ..., preemptible: _Optional[bool] = ..., attained: _Optional[_Union[AttainedService, _Mapping]] = ..., age: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., slices: _Optional[_Union[SliceRequest, _Mapping]] = ..., max_deferral: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., excluded_nodes: _Optional[_Iterable[str]] = ..., node_selector: _Optional[_Iterable[_Union[NodeSelectorTerm, _Mapping]]] = ..., tolerations: _Optional[_Iterable[_Union[Toleration, _Mapping]]] = ..., node_preferences: _Optional[_Iterable[_Union[PreferredSchedulingTerm, _Mapping]]] = ...) -> None: ...

class ObjectiveWeights(_message.Message):
    __slots__ = ("throughput", "energy", "migration", "locality", "deadline", "fairness", "energy_basis", "completion", "node_preference")
    THROUGHPUT_FIELD_NUMBER: _ClassVar[int]
    ENERGY_FIELD_NUMBER: _ClassVar[int]
    MIGRATION_FIELD_NUMBER: _ClassVar[int]
    LOCALITY_FIELD_NUMBER: _ClassVar[int]
    DEADLINE_FIELD_NUMBER: _ClassVar[int]
    FAIRNESS_FIELD_NUMBER: _ClassVar[int]
    ENERGY_BASIS_FIELD_NUMBER: _ClassVar[int]
    COMPLETION_FIELD_NUMBER: _ClassVar[int]
    NODE_PREFERENCE_FIELD_NUMBER: _ClassVar[int]
    throughput: float
    energy: float
    migration: float
    locality: float
    deadline: float
    fairness: float
    energy_basis: EnergyBasis
    completion: float
    node_preference: float
    def __init__(self, throughput: _Optional[float] = ..., energy: _Optional[float] = ..., migration: _Optional[float] = ..., locality: _Optional[float] = ..., deadline: _Optional[float] = ..., fairness: _Optional[float] = ..., energy_basis: _Optional[_Union[EnergyBasis, str]] = ..., completion: _Optional[float] = ..., node_preference: _Optional[float] = ...) -> None: ...

class Fairness(_message.Message):
    __slots__ = ("mode", "scope", "horizon", "mean_weight")
    MODE_FIELD_NUMBER: _ClassVar[int]
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    HORIZON_FIELD_NUMBER: _ClassVar[int]
    MEAN_WEIGHT_FIELD_NUMBER: _ClassVar[int]
    mode: FairnessMode
    scope: FairnessScope
    horizon: _duration_pb2.Duration
    mean_weight: float
    def __init__(self, mode: _Optional[_Union[FairnessMode, str]] = ..., scope: _Optional[_Union[FairnessScope, str]] = ..., horizon: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., mean_weight: _Optional[float] = ...) -> None: ...

class SolveOptions(_message.Message):
    __slots__ = ("time_budget", "backend", "relative_gap", "seed", "threads", "pyomo_solver")
    TIME_BUDGET_FIELD_NUMBER: _ClassVar[int]
    BACKEND_FIELD_NUMBER: _ClassVar[int]
    RELATIVE_GAP_FIELD_NUMBER: _ClassVar[int]
    SEED_FIELD_NUMBER: _ClassVar[int]
    THREADS_FIELD_NUMBER: _ClassVar[int]
    PYOMO_SOLVER_FIELD_NUMBER: _ClassVar[int]
    time_budget: _duration_pb2.Duration
    backend: Backend
    relative_gap: float
    seed: int
    threads: int
    pyomo_solver: str
    def __init__(self, time_budget: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., backend: _Optional[_Union[Backend, str]] = ..., relative_gap: _Optional[float] = ..., seed: _Optional[int] = ..., threads: _Optional[int] = ..., pyomo_solver: _Optional[str] = ...) -> None: ...

class SolveRequest(_message.Message):
    __slots__ = ("cluster", "jobs", "weights", "options", "fairness")
    CLUSTER_FIELD_NUMBER: _ClassVar[int]
    JOBS_FIELD_NUMBER: _ClassVar[int]
    WEIGHTS_FIELD_NUMBER: _ClassVar[int]
    OPTIONS_FIELD_NUMBER: _ClassVar[int]
    FAIRNESS_FIELD_NUMBER: _ClassVar[int]
    cluster: ClusterSnapshot
    jobs: _containers.RepeatedCompositeFieldContainer[Job]
    weights: ObjectiveWeights
    options: SolveOptions
    fairness: Fairness
    def __init__(self, cluster: _Optional[_Union[ClusterSnapshot, _Mapping]] = ..., jobs: _Optional[_Iterable[_Union[Job, _Mapping]]] = ..., weights: _Optional[_Union[ObjectiveWeights, _Mapping]] = ..., options: _Optional[_Union[SolveOptions, _Mapping]] = ..., fairness: _Optional[_Union[Fairness, _Mapping]] = ...) -> None: ...

class JobAssignment(_message.Message):
    __slots__ = ("job", "state", "queue_reason", "queue_detail", "gpu_type", "num_gpus", "data_parallel", "tensor_parallel", "pipeline_parallel", "sm_clock_mhz", "placement", "samples_per_second", "watts", "memory_per_gpu_gib", "migrated", "borrowed", "mig_instance", "mig_resource", "slurm_gres", "power_limit_watts")
    JOB_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    QUEUE_REASON_FIELD_NUMBER: _ClassVar[int]
    QUEUE_DETAIL_FIELD_NUMBER: _ClassVar[int]
    GPU_TYPE_FIELD_NUMBER: _ClassVar[int]
    NUM_GPUS_FIELD_NUMBER: _ClassVar[int]
    DATA_PARALLEL_FIELD_NUMBER: _ClassVar[int]
    TENSOR_PARALLEL_FIELD_NUMBER: _ClassVar[int]
    PIPELINE_PARALLEL_FIELD_NUMBER: _ClassVar[int]
    SM_CLOCK_MHZ_FIELD_NUMBER: _ClassVar[int]
    PLACEMENT_FIELD_NUMBER: _ClassVar[int]
    SAMPLES_PER_SECOND_FIELD_NUMBER: _ClassVar[int]
    WATTS_FIELD_NUMBER: _ClassVar[int]
    MEMORY_PER_GPU_GIB_FIELD_NUMBER: _ClassVar[int]
    MIGRATED_FIELD_NUMBER: _ClassVar[int]
    BORROWED_FIELD_NUMBER: _ClassVar[int]
    MIG_INSTANCE_FIELD_NUMBER: _ClassVar[int]
    MIG_RESOURCE_FIELD_NUMBER: _ClassVar[int]
    SLURM_GRES_FIELD_NUMBER: _ClassVar[int]
    POWER_LIMIT_WATTS_FIELD_NUMBER: _ClassVar[int]
    job: str
    state: JobState
    queue_reason: QueueReason
    queue_detail: str
    gpu_type: str
    num_gpus: int
    data_parallel: int
    tensor_parallel: int
    pipeline_parallel: int
    sm_clock_mhz: int
    placement: _containers.RepeatedCompositeFieldContainer[GpuSlice]
    samples_per_second: float
    watts: float
    memory_per_gpu_gib: float
    migrated: bool
    borrowed: bool
    mig_instance: MigInstance
    mig_resource: str
    slurm_gres: str
    power_limit_watts: float
    def __init__(self, job: _Optional[str] = ..., state: _Optional[_Union[JobState, str]] = ..., queue_reason: _Optional[_Union[QueueReason, str]] = ..., queue_detail: _Optional[str] = ..., gpu_type: _Optional[str] = ..., num_gpus: _Optional[int] = ..., data_parallel: _Optional[int] = ..., tensor_parallel: _Optional[int] = ..., pipeline_parallel: _Optional[int] = ..., sm_clock_mhz: _Optional[int] = ..., placement: _Optional[_Iterable[_Union[GpuSlice, _Mapping]]] = ..., samples_per_second: _Optional[float] = ..., watts: _Optional[float] = ..., memory_per_gpu_gib: _Optional[float] = ..., migrated: _Optional[bool] = ..., borrowed: _Optional[bool] = ..., mig_instance: _Optional[_Union[MigInstance, _Mapping]] = ..., mig_resource: _Optional[str] = ..., slurm_gres: _Optional[str] = ..., power_limit_watts: _Optional[float] = ...) -> None: ...

class MigLayoutChange(_message.Message):
    __slots__ = ("node", "layout")
    NODE_FIELD_NUMBER: _ClassVar[int]
    LAYOUT_FIELD_NUMBER: _ClassVar[int]
    node: str
    layout: MigLayout
    def __init__(self, node: _Optional[str] = ..., layout: _Optional[_Union[MigLayout, _Mapping]] = ...) -> None: ...

class ObjectiveBreakdown(_message.Message):
    __slots__ = ("total", "throughput", "energy", "migration", "locality", "deadline", "fairness", "aging", "completion", "node_preference")
    TOTAL_FIELD_NUMBER: _ClassVar[int]
    THROUGHPUT_FIELD_NUMBER: _ClassVar[int]
    ENERGY_FIELD_NUMBER: _ClassVar[int]
    MIGRATION_FIELD_NUMBER: _ClassVar[int]
    LOCALITY_FIELD_NUMBER: _ClassVar[int]
    DEADLINE_FIELD_NUMBER: _ClassVar[int]
    FAIRNESS_FIELD_NUMBER: _ClassVar[int]
    AGING_FIELD_NUMBER: _ClassVar[int]
    COMPLETION_FIELD_NUMBER: _ClassVar[int]
    NODE_PREFERENCE_FIELD_NUMBER: _ClassVar[int]
    total: float
    throughput: float
    energy: float
    migration: float
    locality: float
    deadline: float
    fairness: float
    aging: float
    completion: float
    node_preference: float
    def __init__(self, total: _Optional[float] = ..., throughput: _Optional[float] = ..., energy: _Optional[float] = ..., migration: _Optional[float] = ..., locality: _Optional[float] = ..., deadline: _Optional[float] = ..., fairness: _Optional[float] = ..., aging: _Optional[float] = ..., completion: _Optional[float] = ..., node_preference: _Optional[float] = ...) -> None: ...

class ResourceUsage(_message.Message):
    __slots__ = ("resource", "used", "nominal", "borrowed")
    RESOURCE_FIELD_NUMBER: _ClassVar[int]
    USED_FIELD_NUMBER: _ClassVar[int]
    NOMINAL_FIELD_NUMBER: _ClassVar[int]
    BORROWED_FIELD_NUMBER: _ClassVar[int]
    resource: str
    used: float
    nominal: float
    borrowed: float
    def __init__(self, resource: _Optional[str] = ..., used: _Optional[float] = ..., nominal: _Optional[float] = ..., borrowed: _Optional[float] = ...) -> None: ...

class QueueUsage(_message.Message):
    __slots__ = ("queue", "resources")
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    RESOURCES_FIELD_NUMBER: _ClassVar[int]
    queue: str
    resources: _containers.RepeatedCompositeFieldContainer[ResourceUsage]
    def __init__(self, queue: _Optional[str] = ..., resources: _Optional[_Iterable[_Union[ResourceUsage, _Mapping]]] = ...) -> None: ...

class PowerMargin(_message.Message):
    __slots__ = ("budget_watts", "predicted_watts", "margin_watts", "slack_watts", "limited_watts", "z")
    BUDGET_WATTS_FIELD_NUMBER: _ClassVar[int]
    PREDICTED_WATTS_FIELD_NUMBER: _ClassVar[int]
    MARGIN_WATTS_FIELD_NUMBER: _ClassVar[int]
    SLACK_WATTS_FIELD_NUMBER: _ClassVar[int]
    LIMITED_WATTS_FIELD_NUMBER: _ClassVar[int]
    Z_FIELD_NUMBER: _ClassVar[int]
    budget_watts: float
    predicted_watts: float
    margin_watts: float
    slack_watts: float
    limited_watts: float
    z: float
    def __init__(self, budget_watts: _Optional[float] = ..., predicted_watts: _Optional[float] = ..., margin_watts: _Optional[float] = ..., slack_watts: _Optional[float] = ..., limited_watts: _Optional[float] = ..., z: _Optional[float] = ...) -> None: ...

class Plan(_message.Message):
    __slots__ = ("assignments", "objective", "queues", "layout_changes", "power_margin", "power_actions")
    ASSIGNMENTS_FIELD_NUMBER: _ClassVar[int]
    OBJECTIVE_FIELD_NUMBER: _ClassVar[int]
    QUEUES_FIELD_NUMBER: _ClassVar[int]
    LAYOUT_CHANGES_FIELD_NUMBER: _ClassVar[int]
    POWER_MARGIN_FIELD_NUMBER: _ClassVar[int]
    POWER_ACTIONS_FIELD_NUMBER: _ClassVar[int]
    assignments: _containers.RepeatedCompositeFieldContainer[JobAssignment]
    objective: ObjectiveBreakdown
    queues: _containers.RepeatedCompositeFieldContainer[QueueUsage]
    layout_changes: _containers.RepeatedCompositeFieldContainer[MigLayoutChange]
    power_margin: PowerMargin
    power_actions: _containers.RepeatedCompositeFieldContainer[NodePowerAction]
    def __init__(self, assignments: _Optional[_Iterable[_Union[JobAssignment, _Mapping]]] = ..., objective: _Optional[_Union[ObjectiveBreakdown, _Mapping]] = ..., queues: _Optional[_Iterable[_Union[QueueUsage, _Mapping]]] = ..., layout_changes: _Optional[_Iterable[_Union[MigLayoutChange, _Mapping]]] = ..., power_margin: _Optional[_Union[PowerMargin, _Mapping]] = ..., power_actions: _Optional[_Iterable[_Union[NodePowerAction, _Mapping]]] = ...) -> None: ...

class NodePowerAction(_message.Message):
    __slots__ = ("node", "kind", "reason")
    NODE_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    node: str
    kind: PowerActionKind
    reason: str
    def __init__(self, node: _Optional[str] = ..., kind: _Optional[_Union[PowerActionKind, str]] = ..., reason: _Optional[str] = ...) -> None: ...

class SolveStats(_message.Message):
    __slots__ = ("termination", "backend_used", "objective", "best_bound", "relative_gap", "wall_time", "time_to_first_plan", "num_configurations", "num_configurations_enumerated", "detail")
    TERMINATION_FIELD_NUMBER: _ClassVar[int]
    BACKEND_USED_FIELD_NUMBER: _ClassVar[int]
    OBJECTIVE_FIELD_NUMBER: _ClassVar[int]
    BEST_BOUND_FIELD_NUMBER: _ClassVar[int]
    RELATIVE_GAP_FIELD_NUMBER: _ClassVar[int]
    WALL_TIME_FIELD_NUMBER: _ClassVar[int]
    TIME_TO_FIRST_PLAN_FIELD_NUMBER: _ClassVar[int]
    NUM_CONFIGURATIONS_FIELD_NUMBER: _ClassVar[int]
    NUM_CONFIGURATIONS_ENUMERATED_FIELD_NUMBER: _ClassVar[int]
    DETAIL_FIELD_NUMBER: _ClassVar[int]
    termination: Termination
    backend_used: Backend
    objective: float
    best_bound: float
    relative_gap: float
    wall_time: _duration_pb2.Duration
    time_to_first_plan: _duration_pb2.Duration
    num_configurations: int
    num_configurations_enumerated: int
    detail: str
    def __init__(self, termination: _Optional[_Union[Termination, str]] = ..., backend_used: _Optional[_Union[Backend, str]] = ..., objective: _Optional[float] = ..., best_bound: _Optional[float] = ..., relative_gap: _Optional[float] = ..., wall_time: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., time_to_first_plan: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., num_configurations: _Optional[int] = ..., num_configurations_enumerated: _Optional[int] = ..., detail: _Optional[str] = ...) -> None: ...

class SolveResponse(_message.Message):
    __slots__ = ("plan", "stats")
    PLAN_FIELD_NUMBER: _ClassVar[int]
    STATS_FIELD_NUMBER: _ClassVar[int]
    plan: Plan
    stats: SolveStats
    def __init__(self, plan: _Optional[_Union[Plan, _Mapping]] = ..., stats: _Optional[_Union[SolveStats, _Mapping]] = ...) -> None: ...

class FieldViolation(_message.Message):
    __slots__ = ("field", "description")
    FIELD_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    field: str
    description: str
    def __init__(self, field: _Optional[str] = ..., description: _Optional[str] = ...) -> None: ...

class ValidateSnapshotRequest(_message.Message):
    __slots__ = ("request",)
    REQUEST_FIELD_NUMBER: _ClassVar[int]
    request: SolveRequest
    def __init__(self, request: _Optional[_Union[SolveRequest, _Mapping]] = ...) -> None: ...

class JobSummary(_message.Message):
    __slots__ = ("job", "num_configurations", "best_samples_per_second", "usable_nodes", "preferred_nodes")
    JOB_FIELD_NUMBER: _ClassVar[int]
    NUM_CONFIGURATIONS_FIELD_NUMBER: _ClassVar[int]
    BEST_SAMPLES_PER_SECOND_FIELD_NUMBER: _ClassVar[int]
    USABLE_NODES_FIELD_NUMBER: _ClassVar[int]
    PREFERRED_NODES_FIELD_NUMBER: _ClassVar[int]
    job: str
    num_configurations: int
    best_samples_per_second: float
    usable_nodes: int
    preferred_nodes: int
    def __init__(self, job: _Optional[str] = ..., num_configurations: _Optional[int] = ..., best_samples_per_second: _Optional[float] = ..., usable_nodes: _Optional[int] = ..., preferred_nodes: _Optional[int] = ...) -> None: ...

class GpuTypeSummary(_message.Message):
    __slots__ = ("gpu_type", "efficiency_family", "compute_efficiency", "mig_geometry")
    GPU_TYPE_FIELD_NUMBER: _ClassVar[int]
    EFFICIENCY_FAMILY_FIELD_NUMBER: _ClassVar[int]
    COMPUTE_EFFICIENCY_FIELD_NUMBER: _ClassVar[int]
    MIG_GEOMETRY_FIELD_NUMBER: _ClassVar[int]
    gpu_type: str
    efficiency_family: str
    compute_efficiency: float
    mig_geometry: str
    def __init__(self, gpu_type: _Optional[str] = ..., efficiency_family: _Optional[str] = ..., compute_efficiency: _Optional[float] = ..., mig_geometry: _Optional[str] = ...) -> None: ...

class ValidateSnapshotResponse(_message.Message):
    __slots__ = ("valid", "violations", "jobs", "gpu_types")
    VALID_FIELD_NUMBER: _ClassVar[int]
    VIOLATIONS_FIELD_NUMBER: _ClassVar[int]
    JOBS_FIELD_NUMBER: _ClassVar[int]
    GPU_TYPES_FIELD_NUMBER: _ClassVar[int]
    valid: bool
    violations: _containers.RepeatedCompositeFieldContainer[FieldViolation]
    jobs: _containers.RepeatedCompositeFieldContainer[JobSummary]
    gpu_types: _containers.RepeatedCompositeFieldContainer[GpuTypeSummary]
    def __init__(self, valid: _Optional[bool] = ..., violations: _Optional[_Iterable[_Union[FieldViolation, _Mapping]]] = ..., jobs: _Optional[_Iterable[_Union[JobSummary, _Mapping]]] = ..., gpu_types: _Optional[_Iterable[_Union[GpuTypeSummary, _Mapping]]] = ...) -> None: ...

class EvaluatePlanRequest(_message.Message):
    __slots__ = ("request", "plan")
    REQUEST_FIELD_NUMBER: _ClassVar[int]
    PLAN_FIELD_NUMBER: _ClassVar[int]
    request: SolveRequest
    plan: Plan
    def __init__(self, request: _Optional[_Union[SolveRequest, _Mapping]] = ..., plan: _Optional[_Union[Plan, _Mapping]] = ...) -> None: ...

class PlanViolation(_message.Message):
    __slots__ = ("constraint", "job", "message")
    CONSTRAINT_FIELD_NUMBER: _ClassVar[int]
    JOB_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    constraint: str
    job: str
    message: str
    def __init__(self, constraint: _Optional[str] = ..., job: _Optional[str] = ..., message: _Optional[str] = ...) -> None: ...

class EvaluatePlanResponse(_message.Message):
    __slots__ = ("valid", "violations", "objective", "power_margin")
    VALID_FIELD_NUMBER: _ClassVar[int]
    VIOLATIONS_FIELD_NUMBER: _ClassVar[int]
    OBJECTIVE_FIELD_NUMBER: _ClassVar[int]
    POWER_MARGIN_FIELD_NUMBER: _ClassVar[int]
    valid: bool
    violations: _containers.RepeatedCompositeFieldContainer[PlanViolation]
    objective: ObjectiveBreakdown
    power_margin: PowerMargin
    def __init__(self, valid: _Optional[bool] = ..., violations: _Optional[_Iterable[_Union[PlanViolation, _Mapping]]] = ..., objective: _Optional[_Union[ObjectiveBreakdown, _Mapping]] = ..., power_margin: _Optional[_Union[PowerMargin, _Mapping]] = ...) -> None: ...

class GetServerInfoRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class GetServerInfoResponse(_message.Message):
    __slots__ = ("version", "backends", "max_time_budget", "max_nodes", "max_jobs", "max_concurrent_solves", "max_message_bytes", "solver_versions", "max_profile_points", "max_rule_node_pairs")
    class SolverVersionsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    VERSION_FIELD_NUMBER: _ClassVar[int]
    BACKENDS_FIELD_NUMBER: _ClassVar[int]
    MAX_TIME_BUDGET_FIELD_NUMBER: _ClassVar[int]
    MAX_NODES_FIELD_NUMBER: _ClassVar[int]
    MAX_JOBS_FIELD_NUMBER: _ClassVar[int]
    MAX_CONCURRENT_SOLVES_FIELD_NUMBER: _ClassVar[int]
    MAX_MESSAGE_BYTES_FIELD_NUMBER: _ClassVar[int]
    SOLVER_VERSIONS_FIELD_NUMBER: _ClassVar[int]
    MAX_PROFILE_POINTS_FIELD_NUMBER: _ClassVar[int]
    MAX_RULE_NODE_PAIRS_FIELD_NUMBER: _ClassVar[int]
    version: str
    backends: _containers.RepeatedScalarFieldContainer[Backend]
    max_time_budget: _duration_pb2.Duration
    max_nodes: int
    max_jobs: int
    max_concurrent_solves: int
    max_message_bytes: int
    solver_versions: _containers.ScalarMap[str, str]
    max_profile_points: int
    max_rule_node_pairs: int
    def __init__(self, version: _Optional[str] = ..., backends: _Optional[_Iterable[_Union[Backend, str]]] = ..., max_time_budget: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., max_nodes: _Optional[int] = ..., max_jobs: _Optional[int] = ..., max_concurrent_solves: _Optional[int] = ..., max_message_bytes: _Optional[int] = ..., solver_versions: _Optional[_Mapping[str, str]] = ..., max_profile_points: _Optional[int] = ..., max_rule_node_pairs: _Optional[int] = ...) -> None: ...
