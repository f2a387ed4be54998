package api

import (
	"net/http"
	"strings"
	"time"

	"github.com/labtap/labtap/proto"
)

// registerImages adds the image and QEMU wizard routes.
func (h *handlers) registerImages(mux *routes, is ImageService) {
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
	mux.HandleFunc("GET /v1/images/{type}/{path...}", func(w http.ResponseWriter, r *http.Request) {
		f, err := is.ImageFile(r.PathValue("type"), r.PathValue("path"))
		if err != nil {
			h.reply(w, nil, err)
			return
		}
		defer f.Close()
		w.Header().Set("Content-Type", "application/octet-stream")
		http.ServeContent(w, r, "", time.Time{}, f)
	})
	mux.HandleFunc("POST "+proto.QemuImgPath, func(w http.ResponseWriter, r *http.Request) {
		var c proto.QemuImgCreate
		if !decode(w, r, &c) {
			return
		}
		h.replyCreated(w, is.CreateQemuImg(r.Context(), c))
	})
	mux.HandleFunc("PUT "+proto.QemuImgPath, func(w http.ResponseWriter, r *http.Request) {
		var c proto.QemuImgResize
		if !decode(w, r, &c) {
			return
		}
		h.replyCreated(w, is.ResizeQemuImg(r.Context(), c))
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

// replyCreated answers 201 with no body, or the error.
func (h *handlers) replyCreated(w http.ResponseWriter, err error) {
	if err != nil {
		h.reply(w, nil, err)
		return
	}
	w.WriteHeader(http.StatusCreated)
}
