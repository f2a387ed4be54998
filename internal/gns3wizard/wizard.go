// Package gns3wizard builds the template GNS3 2.2's GUI sends to
// POST /v2/templates when its "New template" wizard installs an appliance
// of GET /v2/appliances, so tests can check that what labtap lists installs
// and runs. It is imported by tests only.
package gns3wizard

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
)

// Template is the body the wizard posts for appliance (an entry of
// GET /v2/appliances, registry version below 8) installed on computeID.
// version names the appliance version for an appliance with images (its
// files then are those of the compute's image list, by file name), and
// qemuPath the QEMU binary picked on the wizard's binary page (one of
// GET /v2/computes/{id}/qemu/binaries).
func Template(appliance map[string]any, computeID, version, qemuPath string) (map[string]any, error) {
	a, err := clone(appliance)
	if err != nil {
		return nil, err
	}
	name, _ := a["name"].(string)
	t := map[string]any{"compute_id": computeID, "name": name}
	if u, ok := a["usage"]; ok {
		t["usage"] = u
	}
	cat, _ := a["category"].(string)
	if cat == "multilayer_switch" {
		cat = "switch"
	}
	t["category"] = cat
	if s, ok := a["symbol"].(string); ok && s != "" {
		t["symbol"] = s
	}
	switch {
	case a["docker"] != nil:
		t["template_type"] = "docker"
		props, _ := a["docker"].(map[string]any)
		maps.Copy(t, props)
		copyKeys(t, a, "custom_adapters")
	case a["qemu"] != nil:
		images, err := versionImages(a, version)
		if err != nil {
			return nil, err
		}
		t["name"] = name + " " + version
		t["template_type"] = "qemu"
		props, _ := a["qemu"].(map[string]any)
		maps.Copy(t, props)
		for _, k := range []string{"kvm", "path", "arch"} {
			delete(t, k)
		}
		options, _ := props["options"].(string)
		if props["kvm"] == "disable" {
			options += " -machine accel=tcg"
		}
		t["options"] = options
		maps.Copy(t, images)
		t["qemu_path"] = qemuPath
		copyKeys(t, a, "first_port_name", "port_name_format", "port_segment_size", "custom_adapters", "linked_clone")
	default:
		return nil, fmt.Errorf("appliance %s: no docker or qemu member", name)
	}
	return t, nil
}

// versionImages maps a version's image kinds (hda_disk_image, kernel_image,
// ...) to the files the appliance lists for them.
func versionImages(a map[string]any, version string) (map[string]any, error) {
	files := map[string]bool{}
	list, _ := a["images"].([]any)
	for _, f := range list {
		m, _ := f.(map[string]any)
		if name, _ := m["filename"].(string); name != "" {
			files[name] = true
		}
	}
	versions, _ := a["versions"].([]any)
	for _, v := range versions {
		m, _ := v.(map[string]any)
		if m["name"] != version {
			continue
		}
		out := map[string]any{}
		images, _ := m["images"].(map[string]any)
		kinds := slices.Sorted(maps.Keys(images))
		for _, kind := range kinds {
			file, _ := images[kind].(string)
			if !files[file] {
				return nil, fmt.Errorf("version %s: %s names %q, which the appliance does not list", version, kind, file)
			}
			out[kind] = file
		}
		return out, nil
	}
	return nil, fmt.Errorf("no version %q", version)
}

func copyKeys(dst, src map[string]any, keys ...string) {
	for _, k := range keys {
		if v, ok := src[k]; ok {
			dst[k] = v
		}
	}
}

func clone(m map[string]any) (map[string]any, error) {
	raw, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	var out map[string]any
	return out, json.Unmarshal(raw, &out)
}
