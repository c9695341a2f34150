package rpc

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"

	decreev1 "github.com/decreehq/decree/proto/decree/v1"
)

// TestReflectionServesComments: what `grpcurl describe` asks for (the file
// containing a symbol) carries the .proto comments, for services,
// methods, messages and fields; health still resolves.
func TestReflectionServesComments(t *testing.T) {
	conn := serveUnix(t, func(srv *grpc.Server) {
		decreev1.RegisterControllerServiceServer(srv, NewControllerServer(ControllerDeps{}))
		healthpb.RegisterHealthServer(srv, health.NewServer())
		if err := RegisterReflection(srv); err != nil {
			t.Fatal(err)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	st, err := reflectionpb.NewServerReflectionClient(conn).ServerReflectionInfo(ctx)
	if err != nil {
		t.Fatal(err)
	}
	files := func(symbol string) map[string]*descriptorpb.FileDescriptorProto {
		t.Helper()
		if err := st.Send(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_FileContainingSymbol{FileContainingSymbol: symbol}}); err != nil {
			t.Fatal(err)
		}
		r, err := st.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if e := r.GetErrorResponse(); e != nil {
			t.Fatalf("reflection of %s: %v", symbol, e)
		}
		out := map[string]*descriptorpb.FileDescriptorProto{}
		for _, b := range r.GetFileDescriptorResponse().GetFileDescriptorProto() {
			var fd descriptorpb.FileDescriptorProto
			if err := proto.Unmarshal(b, &fd); err != nil {
				t.Fatal(err)
			}
			out[fd.GetName()] = &fd
		}
		return out
	}
	got := files("decree.v1.ControllerService")
	ctl, types := got["decree/v1/controller.proto"], got["decree/v1/types.proto"]
	if ctl == nil || types == nil {
		t.Fatalf("files for decree.v1.ControllerService: %v", keys(got))
	}
	// A resolver over the answer, as grpcurl builds one.
	reg, err := protodesc.NewFiles(&descriptorpb.FileDescriptorSet{File: fileList(got)})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ name, want string }{
		{"decree.v1.ControllerService", "ControllerService is the API of a decree controller"},
		{"decree.v1.ControllerService.SubmitMessage", "SubmitMessage validates a new root message"},
		{"decree.v1.SubmitMessageRequest", "SubmitMessageRequest describes a new root message"},
		{"decree.v1.SubmitMessageRequest.request_id", "Idempotency key"},
		{"decree.v1.MessageOutcome.outcome", "RUN_OUTCOME_CANCELLED"},
		{"decree.v1.MessageState", "where a message is in its life"},
		{"decree.v1.MESSAGE_STATE_INTERRUPTED", "attempt stopped by a controller shutdown"},
		{"decree.v1.MessageInfo.routine", "routine"},
	} {
		d, err := reg.FindDescriptorByName(protoreflect.FullName(c.name))
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		loc := d.ParentFile().SourceLocations().ByDescriptor(d)
		if !strings.Contains(loc.LeadingComments, c.want) {
			t.Errorf("%s: leading comment %q, want one containing %q", c.name, loc.LeadingComments, c.want)
		}
	}
	if h := files("grpc.health.v1.Health"); h["grpc/health/v1/health.proto"] == nil {
		t.Errorf("health files: %v", keys(h))
	}
}

// TestEmbeddedDescriptorsMatchGenerated: the embedded set describes the
// same API as the generated code (scripts/generate.sh writes both; a .proto
// edited without it is caught here as well as by scripts/test.sh).
func TestEmbeddedDescriptorsMatchGenerated(t *testing.T) {
	var set descriptorpb.FileDescriptorSet
	if err := proto.Unmarshal(decreev1.SourceDescriptors(), &set); err != nil {
		t.Fatal(err)
	}
	if len(set.GetFile()) < 3 {
		t.Fatalf("the embedded set has %d files", len(set.GetFile()))
	}
	for _, fdp := range set.GetFile() {
		if len(fdp.GetSourceCodeInfo().GetLocation()) == 0 {
			t.Errorf("%s has no source info", fdp.GetName())
		}
		emb := proto.Clone(fdp).(*descriptorpb.FileDescriptorProto)
		emb.SourceCodeInfo = nil
		gen := protodesc.ToFileDescriptorProto(mustFile(t, fdp.GetName()))
		gen.SourceCodeInfo = nil
		if !proto.Equal(emb, gen) {
			t.Errorf("%s: the embedded descriptor differs from the generated one; run scripts/generate.sh", fdp.GetName())
		}
	}
}

func mustFile(t *testing.T, path string) protoreflect.FileDescriptor {
	t.Helper()
	fd, err := protoregistry.GlobalFiles.FindFileByPath(path)
	if err != nil {
		t.Fatal(err)
	}
	return fd
}

func keys(m map[string]*descriptorpb.FileDescriptorProto) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func fileList(m map[string]*descriptorpb.FileDescriptorProto) []*descriptorpb.FileDescriptorProto {
	var out []*descriptorpb.FileDescriptorProto
	for _, f := range m {
		out = append(out, f)
	}
	return out
}
