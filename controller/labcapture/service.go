package labcapture

import (
	"context"
	"io"

	"github.com/labtap/labtap/capspec"
	"github.com/labtap/labtap/controller/project"
)

// ServiceProjects returns what a project capture needs of the projects,
// taken from the parts of a *project.Service.
func ServiceProjects(s *project.Service) Projects { return serviceProjects{s} }

type serviceProjects struct{ s *project.Service }

func (p serviceProjects) Project(id string) (project.Project, error) { return p.s.Project(id) }

func (p serviceProjects) Links(projectID string) ([]project.Link, error) {
	return p.s.Links.List(projectID)
}

func (p serviceProjects) Link(projectID, linkID string) (project.Link, error) {
	return p.s.Links.Get(projectID, linkID)
}

func (p serviceProjects) Nodes(projectID string) ([]project.Node, error) {
	return p.s.Nodes.List(projectID)
}

func (p serviceProjects) StartCapture(ctx context.Context, projectID, linkID string, spec capspec.Spec) (project.Link, error) {
	return p.s.Captures.Start(ctx, projectID, linkID, spec)
}

func (p serviceProjects) StopCapture(ctx context.Context, projectID, linkID string) (project.Link, error) {
	return p.s.Captures.Stop(ctx, projectID, linkID)
}

func (p serviceProjects) CaptureStream(ctx context.Context, projectID, linkID string) (io.ReadCloser, error) {
	return p.s.Captures.Stream(ctx, projectID, linkID)
}
