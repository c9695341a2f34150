package decreev1

import _ "embed"

// sourceDescriptors is the google.protobuf.FileDescriptorSet of the
// decree/v1 files with their source info (the comments), made by
// scripts/generate.sh with `buf build --as-file-descriptor-set
// --exclude-imports`; scripts/test.sh checks it matches the .proto files.
// The descriptors protoc-gen-go registers have no source info, so server
// reflection serves these instead, and `grpcurl describe` shows the
// documentation.
//
//go:embed decree.binpb
var sourceDescriptors []byte

// SourceDescriptors returns the serialized FileDescriptorSet of the
// decree/v1 files, comments included. Do not change the returned bytes.
func SourceDescriptors() []byte { return sourceDescriptors }
