"""gRPC server reflection, as ``grpc.reflection.v1.ServerReflection`` and the older v1alpha.

grpcio-reflection serves only v1alpha. The v1 service is wire-identical to it but for the
package name, so its method path is served by the same v1alpha servicer, whose messages read and
write v1's bytes unchanged. The v1 descriptors, generated from third_party/grpc-proto by
``make proto``, are imported so that reflection can describe the v1 service too.
"""

from __future__ import annotations

from collections.abc import Iterable

import grpc
from grpc_reflection.v1alpha import reflection as v1alpha
from grpc_reflection.v1alpha import reflection_pb2 as v1alpha_pb2
from grpc_reflection.v1alpha import reflection_pb2_grpc as v1alpha_pb2_grpc

from solver._proto.grpc.reflection.v1 import reflection_pb2 as v1_pb2

V1_SERVICE_NAME: str = v1_pb2.DESCRIPTOR.services_by_name["ServerReflection"].full_name
V1ALPHA_SERVICE_NAME: str = v1alpha.SERVICE_NAME


def enable_server_reflection(service_names: Iterable[str], server: grpc.Server) -> None:
    """Serve reflection v1 and v1alpha on ``server`` for ``service_names`` and themselves."""
    names = (*service_names, V1_SERVICE_NAME, V1ALPHA_SERVICE_NAME)
    servicer = v1alpha.ReflectionServicer(names)
    v1alpha_pb2_grpc.add_ServerReflectionServicer_to_server(servicer, server)
    handler = grpc.method_handlers_generic_handler(
        V1_SERVICE_NAME,
        {
            "ServerReflectionInfo": grpc.stream_stream_rpc_method_handler(
                servicer.ServerReflectionInfo,
                request_deserializer=v1alpha_pb2.ServerReflectionRequest.FromString,
                response_serializer=v1alpha_pb2.ServerReflectionResponse.SerializeToString,
            )
        },
    )
    server.add_generic_rpc_handlers((handler,))
