package docker

import (
	"bytes"
	"os"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

// No cluster runs here: the manifests are built with kustomize's library
// (what kubectl apply -k runs), decoded strictly into the Kubernetes API
// types (a member the API does not have fails) and held to what the
// controller and the agents need.

// kustomization is the part of kustomize's file these manifests use.
type kustomization struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Namespace  string `json:"namespace"`
	Labels     []struct {
		Pairs map[string]string `json:"pairs"`
	} `json:"labels"`
	Resources []string         `json:"resources"`
	Images    []kustomizeImage `json:"images"`
}

type kustomizeImage struct {
	Name    string `json:"name"`
	NewTag  string `json:"newTag"`
	NewName string `json:"newName"`
}

// k8sObjects builds the kustomization as kubectl apply -k does (kustomize's
// own library) and decodes every object of the build, strictly, by kind.
func k8sObjects(t *testing.T) (k kustomization, services []corev1.Service, sets []appsv1.StatefulSet, daemons []appsv1.DaemonSet) {
	t.Helper()
	data, err := os.ReadFile("k8s/kustomization.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict(data, &k); err != nil {
		t.Fatalf("kustomization.yaml: %v", err)
	}
	if k.APIVersion != "kustomize.config.k8s.io/v1beta1" || k.Kind != "Kustomization" || k.Namespace != "labtap" {
		t.Fatalf("kustomization: %+v", k)
	}
	built, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), "k8s")
	if err != nil {
		t.Fatalf("kustomize build docker/k8s: %v", err)
	}
	out, err := built.AsYaml()
	if err != nil {
		t.Fatal(err)
	}
	for i, doc := range bytes.Split(out, []byte("\n---\n")) {
		var head struct {
			Kind     string
			Metadata struct {
				Namespace string
				Labels    map[string]string
			}
		}
		if err := yaml.Unmarshal(doc, &head); err != nil {
			t.Fatalf("built document %d: %v", i, err)
		}
		if head.Metadata.Namespace != k.Namespace || head.Metadata.Labels["app.kubernetes.io/part-of"] != "labtap" {
			t.Fatalf("built document %d (%s): namespace %q, labels %v", i, head.Kind, head.Metadata.Namespace, head.Metadata.Labels)
		}
		var dst any
		switch head.Kind {
		case "Service":
			services = append(services, corev1.Service{})
			dst = &services[len(services)-1]
		case "StatefulSet":
			sets = append(sets, appsv1.StatefulSet{})
			dst = &sets[len(sets)-1]
		case "DaemonSet":
			daemons = append(daemons, appsv1.DaemonSet{})
			dst = &daemons[len(daemons)-1]
		default:
			t.Fatalf("built document %d: kind %q not checked here", i, head.Kind)
		}
		if err := yaml.UnmarshalStrict(doc, dst); err != nil {
			t.Fatalf("built document %d (%s): %v", i, head.Kind, err)
		}
	}
	return k, services, sets, daemons
}

func envOf(c corev1.Container) map[string]corev1.EnvVar {
	m := map[string]corev1.EnvVar{}
	for _, e := range c.Env {
		m[e.Name] = e
	}
	return m
}

func TestKubernetesManifestsDecodeStrictlyAndGiveAgentsWhatTheyNeed(t *testing.T) {
	k, services, sets, daemons := k8sObjects(t)
	if len(sets) != 1 || len(daemons) != 1 {
		t.Fatalf("want one StatefulSet and one DaemonSet, got %d and %d", len(sets), len(daemons))
	}

	// The controller: one replica, its data on a claim, its API on a
	// Service the agents' URL names, its secret from a Secret.
	ctl := sets[0]
	if ctl.Spec.Replicas == nil || *ctl.Spec.Replicas != 1 || len(ctl.Spec.VolumeClaimTemplates) != 1 {
		t.Fatalf("controller: replicas %v, claims %d", ctl.Spec.Replicas, len(ctl.Spec.VolumeClaimTemplates))
	}
	cc := ctl.Spec.Template.Spec.Containers[0]
	claim := ctl.Spec.VolumeClaimTemplates[0].Name
	env := envOf(cc)
	if !slices.ContainsFunc(cc.VolumeMounts, func(m corev1.VolumeMount) bool {
		return m.Name == claim && m.MountPath == env["LABTAP_DATA_DIR"].Value
	}) {
		t.Fatalf("controller: the claim is not its data dir: %+v", cc.VolumeMounts)
	}
	if env["LABTAP_SECRET"].ValueFrom == nil || env["LABTAP_SECRET"].ValueFrom.SecretKeyRef == nil {
		t.Fatal("controller: LABTAP_SECRET is not from a Secret")
	}
	if env["LABTAP_LOCAL_AGENT"].Value != "false" || !strings.HasPrefix(env["LABTAP_LISTEN"].Value, "0.0.0.0:") {
		t.Fatalf("controller env: %+v", env)
	}
	if cc.ReadinessProbe == nil || cc.LivenessProbe == nil {
		t.Fatal("controller: no probes")
	}
	if sc := ctl.Spec.Template.Spec.SecurityContext; sc == nil || sc.RunAsUser == nil || sc.FSGroup == nil {
		t.Fatal("controller: a named image user needs numeric runAsUser, and its volume fsGroup")
	}
	var svc *corev1.Service
	for i := range services {
		if services[i].Name == "labtap-controller" {
			svc = &services[i]
		}
	}
	if svc == nil || svc.Spec.Selector["app.kubernetes.io/name"] != ctl.Spec.Template.Labels["app.kubernetes.io/name"] ||
		len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Port != 3080 {
		t.Fatalf("controller Service: %+v", svc)
	}

	// The agents: host network (UDP tunnels, consoles), the node's name
	// as compute id, registration with the controller's Service, the
	// privileges docker and QEMU nodes need, probes and a preStop.
	ds := daemons[0]
	pod := ds.Spec.Template.Spec
	if !pod.HostNetwork || pod.DNSPolicy != corev1.DNSClusterFirstWithHostNet {
		t.Fatalf("agent: hostNetwork %v, dnsPolicy %q: tunnels need the host's network, and it the cluster's DNS", pod.HostNetwork, pod.DNSPolicy)
	}
	if !pod.HostPID {
		t.Fatal("agent: docker nodes' interfaces are made in their container's netns, found by its host pid")
	}
	ac := pod.Containers[0]
	aenv := envOf(ac)
	if f := aenv["LABTAP_COMPUTE_ID"].ValueFrom; f == nil || f.FieldRef == nil || f.FieldRef.FieldPath != "spec.nodeName" {
		t.Fatal("agent: the compute id is not the node's name")
	}
	if f := aenv["LABTAP_ADVERTISE"].ValueFrom; f == nil || f.FieldRef == nil || f.FieldRef.FieldPath != "status.hostIP" {
		t.Fatal("agent: it does not advertise the host's address")
	}
	wantURL := "http://" + svc.Name + "." + k.Namespace + ".svc.cluster.local:3080"
	if aenv["LABTAP_CONTROLLER"].Value != wantURL {
		t.Fatalf("agent: LABTAP_CONTROLLER %q, want the controller's Service %q", aenv["LABTAP_CONTROLLER"].Value, wantURL)
	}
	if f := aenv["LABTAP_SECRET"].ValueFrom; f == nil || f.SecretKeyRef == nil ||
		*f.SecretKeyRef != *env["LABTAP_SECRET"].ValueFrom.SecretKeyRef {
		t.Fatal("agent: not the controller's secret")
	}
	// $(VAR) expands only variables defined before it.
	if !strings.Contains(aenv["LABTAP_LISTEN"].Value, "$(LABTAP_ADVERTISE)") ||
		slices.IndexFunc(ac.Env, func(e corev1.EnvVar) bool { return e.Name == "LABTAP_ADVERTISE" }) >
			slices.IndexFunc(ac.Env, func(e corev1.EnvVar) bool { return e.Name == "LABTAP_LISTEN" }) {
		t.Fatalf("agent: LABTAP_LISTEN %q must follow LABTAP_ADVERTISE", aenv["LABTAP_LISTEN"].Value)
	}
	sc := ac.SecurityContext
	if sc == nil || sc.Privileged == nil || !*sc.Privileged || sc.RunAsUser == nil || *sc.RunAsUser != 0 {
		t.Fatal("agent: /dev/kvm (where present) opens only in a privileged container; the node sandbox needs root")
	}
	for _, c := range []corev1.Capability{"NET_ADMIN", "NET_RAW", "SYS_ADMIN", "SYS_PTRACE", "SETUID", "SETGID", "SYS_NICE"} {
		if sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Add, c) {
			t.Errorf("agent: capability %s not listed", c)
		}
	}
	if !strings.HasPrefix(aenv["DOCKER_HOST"].Value, "unix:///host/run/") ||
		!slices.ContainsFunc(pod.Volumes, func(v corev1.Volume) bool {
			return v.HostPath != nil && v.HostPath.Path == "/run" && v.HostPath.Type != nil && *v.HostPath.Type == corev1.HostPathDirectory
		}) {
		t.Fatal("agent: the host's Docker socket is not reachable (or its mount fails where the host has none)")
	}
	if ac.ReadinessProbe == nil || ac.LivenessProbe == nil {
		t.Fatal("agent: no probes")
	}
	if ac.Lifecycle == nil || ac.Lifecycle.PreStop == nil || pod.TerminationGracePeriodSeconds == nil || *pod.TerminationGracePeriodSeconds < 60 {
		t.Fatal("agent: no preStop, or too little grace to stop its nodes and close its captures")
	}
	for _, c := range []corev1.Container{cc, ac} {
		if !slices.ContainsFunc(k.Images, func(i kustomizeImage) bool { return i.Name+":"+i.NewTag == c.Image }) {
			t.Errorf("image %s is not set by the kustomization", c.Image)
		}
	}
}
