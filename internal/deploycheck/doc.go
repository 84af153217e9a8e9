// Package deploycheck holds the checks of the Kubernetes manifests in deploy/k8s: its test
// builds the kustomization and its overlays with the kustomize library, decodes every
// object strictly into the Kubernetes API types, and checks the wiring against the
// binaries' own flags (selectors, ports, probes, peer addresses, Secrets and ConfigMaps).
// It is a package of its own so that its heavy dependencies build only for it.
package deploycheck
