package appliances

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/labtap/labtap/controller/compute"
)

// guestFiles is a compute's QEMU image list holding the tiny guest.
func guestFiles(sum string) []compute.Image {
	return []compute.Image{
		{Filename: "initrd.img", Path: "initrd.img", MD5Sum: sum, FileSize: 20},
		{Filename: "vmlinuz", Path: "vmlinuz", MD5Sum: sum, FileSize: 10},
	}
}

func guest(l []map[string]any) map[string]any {
	for _, a := range l {
		if _, ok := a["qemu"]; ok {
			return a
		}
	}
	return nil
}

// The guest's sums come from the first connected compute that runs qemu
// and holds both files, local first; a disconnected compute, one that
// fails to list, one that lacks a file or has no sum yet does not count.
func TestTheGuestIsSummedFromAComputeHoldingItsFiles(t *testing.T) {
	const localSum, remoteSum = "11111111111111111111111111111111", "22222222222222222222222222222222"
	images := map[string][]compute.Image{
		"local":  guestFiles(localSum),
		"remote": guestFiles(remoteSum),
		"off":    guestFiles("33333333333333333333333333333333"),
		"half":   guestFiles(localSum)[:1],
		"nosum":  guestFiles(""),
	}
	var computes []compute.Compute
	c, err := New(Config{
		Computes: func() []compute.Compute { return computes },
		Images: func(ctx context.Context, id, typ string) ([]compute.Image, error) {
			if typ != "qemu" {
				t.Errorf("images of %s asked for", typ)
			}
			if id == "broken" {
				return nil, errors.New("down")
			}
			if id == "slow" {
				<-ctx.Done()
				return nil, ctx.Err()
			}
			return images[id], nil
		},
		ImageWait: 50 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	qemu := func(id string, connected bool) compute.Compute {
		return compute.Compute{ID: id, Connected: connected, NodeTypes: []string{"vpcs", "qemu"}}
	}
	for _, tc := range []struct {
		name     string
		computes []compute.Compute
		want     string // md5sum of both files; "" the guest is not listed
	}{
		{"none", nil, ""},
		{"local first", []compute.Compute{qemu("remote", true), qemu("local", true)}, localSum},
		{"remote holds them", []compute.Compute{qemu("half", true), qemu("broken", true), qemu("slow", true), qemu("nosum", true), qemu("remote", true)}, remoteSum},
		{"disconnected", []compute.Compute{qemu("off", false)}, ""},
		{"no qemu", []compute.Compute{{ID: "local", Connected: true, NodeTypes: []string{"vpcs", "docker"}}}, ""},
		{"missing files", []compute.Compute{qemu("half", true), qemu("nosum", true)}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			computes = tc.computes
			a := guest(c.List(t.Context(), "Classic"))
			if tc.want == "" {
				if a != nil {
					t.Fatalf("guest listed: %v", a)
				}
				return
			}
			if a == nil {
				t.Fatal("guest not listed")
			}
			for _, im := range a["images"].([]any) {
				if m := im.(map[string]any); m["md5sum"] != tc.want {
					t.Errorf("image %v: md5sum %v, want %s", m["filename"], m["md5sum"], tc.want)
				}
			}
		})
	}
}

// A listing is the caller's: changing it changes no later one.
func TestAListingIsACopy(t *testing.T) {
	c, err := New(Config{Computes: func() []compute.Compute {
		return []compute.Compute{{ID: "local", Connected: true, NodeTypes: []string{"docker", "qemu"}}}
	}, Images: func(context.Context, string, string) ([]compute.Image, error) {
		return guestFiles("44444444444444444444444444444444"), nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	first := c.List(t.Context(), "")
	if len(first) != 3 {
		t.Fatalf("listed %d appliances, want 3", len(first))
	}
	for _, a := range first {
		a["name"] = "changed"
		images, _ := a["images"].([]any)
		for _, im := range images {
			im.(map[string]any)["md5sum"] = "changed"
		}
		if d, ok := a["docker"].(map[string]any); ok {
			d["image"] = "changed"
		}
	}
	for _, a := range c.List(t.Context(), "") {
		if a["name"] == "changed" || a["docker"] != nil && a["docker"].(map[string]any)["image"] == "changed" {
			t.Fatalf("a listing changed the catalogue: %v", a)
		}
		if a["qemu"] != nil && a["images"].([]any)[0].(map[string]any)["md5sum"] == "changed" {
			t.Fatalf("a listing changed the catalogue's images: %v", a)
		}
	}
	// Without Computes nothing runs anything.
	empty, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	if l := empty.List(t.Context(), "Classic"); len(l) != 0 {
		t.Fatalf("no computes: listed %v", l)
	}
}
