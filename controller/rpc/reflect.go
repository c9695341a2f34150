package rpc

import (
	"fmt"

	"google.golang.org/grpc"
	"google.golang.org/grpc/reflection"
	reflectionv1 "google.golang.org/grpc/reflection/grpc_reflection_v1"
	reflectionv1alpha "google.golang.org/grpc/reflection/grpc_reflection_v1alpha"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"

	decreev1 "github.com/decreehq/decree/proto/decree/v1"
)

// RegisterReflection registers server reflection (v1 and v1alpha) on s,
// serving the decree.v1 descriptors with their comments
// (decreev1.SourceDescriptors), so `grpcurl describe` shows every
// service's, method's and field's documentation; other files (health,
// reflection itself, well-known types) come from the global registry.
func RegisterReflection(s *grpc.Server) error {
	files, err := sourceFiles()
	if err != nil {
		return err
	}
	opts := reflection.ServerOptions{Services: s, DescriptorResolver: files, ExtensionResolver: protoregistry.GlobalTypes}
	reflectionv1.RegisterServerReflectionServer(s, reflection.NewServerV1(opts))
	reflectionv1alpha.RegisterServerReflectionServer(s, reflection.NewServer(opts))
	return nil
}

// sourceFiles builds the decree.v1 files from the embedded set, resolving
// their imports from the global registry.
func sourceFiles() (sourceResolver, error) {
	var set descriptorpb.FileDescriptorSet
	if err := proto.Unmarshal(decreev1.SourceDescriptors(), &set); err != nil {
		return sourceResolver{}, fmt.Errorf("reflection: read the embedded descriptors: %w", err)
	}
	files := &protoregistry.Files{}
	for _, fdp := range set.GetFile() {
		fd, err := protodesc.NewFile(fdp, resolverChain{files, protoregistry.GlobalFiles})
		if err != nil {
			return sourceResolver{}, fmt.Errorf("reflection: build %s: %w (run scripts/generate.sh)", fdp.GetName(), err)
		}
		if err := files.RegisterFile(fd); err != nil {
			return sourceResolver{}, fmt.Errorf("reflection: register %s: %w", fdp.GetName(), err)
		}
	}
	return sourceResolver{files}, nil
}

// sourceResolver finds decree.v1 descriptors in its own files (with
// comments) and everything else in the global registry.
type sourceResolver struct{ own *protoregistry.Files }

func (r sourceResolver) FindFileByPath(path string) (protoreflect.FileDescriptor, error) {
	return resolverChain{r.own, protoregistry.GlobalFiles}.FindFileByPath(path)
}

func (r sourceResolver) FindDescriptorByName(name protoreflect.FullName) (protoreflect.Descriptor, error) {
	return resolverChain{r.own, protoregistry.GlobalFiles}.FindDescriptorByName(name)
}

// resolverChain asks each resolver in turn.
type resolverChain []protodesc.Resolver

func (c resolverChain) FindFileByPath(path string) (protoreflect.FileDescriptor, error) {
	for _, r := range c {
		if fd, err := r.FindFileByPath(path); err == nil {
			return fd, nil
		}
	}
	return nil, protoregistry.NotFound
}

func (c resolverChain) FindDescriptorByName(name protoreflect.FullName) (protoreflect.Descriptor, error) {
	for _, r := range c {
		if d, err := r.FindDescriptorByName(name); err == nil {
			return d, nil
		}
	}
	return nil, protoregistry.NotFound
}
