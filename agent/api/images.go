package api

import (
	"net/http"
	"strings"

	"github.com/labtap/labtap/proto"
)

// registerImages adds the image and QEMU wizard routes.
func (h *handlers) registerImages(mux *http.ServeMux, is ImageService) {
	mux.HandleFunc("GET /v1/images/{type}", func(w http.ResponseWriter, r *http.Request) {
		list, err := is.Images(r.Context(), r.PathValue("type"))
		h.reply(w, list, err)
	})
	mux.HandleFunc("PUT /v1/images/{type}/{path...}", func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength > h.maxImage {
			writeError(w, proto.Errorf(proto.CodeInvalid, "Could not write image: %s is larger than %d bytes", r.PathValue("path"), h.maxImage))
			return
		}
		err := is.WriteImage(r.PathValue("type"), r.PathValue("path"), r.Body, h.maxImage)
		if err != nil {
			h.reply(w, nil, err)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("GET "+proto.QemuBinariesPath, func(w http.ResponseWriter, r *http.Request) {
		var archs []string
		if a := r.URL.Query().Get("archs"); a != "" {
			archs = strings.Split(a, ",")
		}
		writeJSON(w, http.StatusOK, is.QemuBinariesList(r.Context(), archs))
	})
	mux.HandleFunc("GET "+proto.QemuImgBinariesPath, func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, is.QemuImgBinaries(r.Context()))
	})
	mux.HandleFunc("GET "+proto.QemuCapabilitiesPath, func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, is.QemuCapabilities())
	})
}
