package archive

import (
	"archive/zip"
	"bytes"
	"compress/bzip2"
	"encoding/binary"
	"errors"
	"io"

	dsbzip2 "github.com/dsnet/compress/bzip2"
	"github.com/ulikunitz/xz/lzma"
)

// GNS3 (Python's zipfile) writes bzip2 and LZMA entries when asked
// (compression=bzip2 / lzma); the standard library reads bzip2 only and
// writes neither.

func registerCompressors(zw *zip.Writer) {
	zw.RegisterCompressor(uint16(Bzip2), func(w io.Writer) (io.WriteCloser, error) {
		return dsbzip2.NewWriter(w, &dsbzip2.WriterConfig{Level: 9})
	})
	zw.RegisterCompressor(uint16(LZMA), newZipLZMAWriter)
}

func registerDecompressors(zr *zip.Reader) {
	zr.RegisterDecompressor(uint16(Bzip2), func(r io.Reader) io.ReadCloser {
		return io.NopCloser(bzip2.NewReader(r))
	})
	zr.RegisterDecompressor(uint16(LZMA), newZipLZMAReader)
}

// An LZMA entry of a zip (APPNOTE 5.8.8) starts with the LZMA SDK version
// (2 bytes), the size of the properties (2 bytes, little-endian: 5) and
// the properties (the lc/lp/pb byte and the dictionary size), then the raw
// stream, ended by an end-of-stream marker (general purpose flag bit 1).
// The classic .lzma header the lzma package speaks is the same properties
// followed by the unpacked size (8 bytes; all ones: unknown).

const lzmaEOSFlag = 0x2

// zipLZMAWriter turns the lzma package's classic header into the zip one.
type zipLZMAWriter struct {
	w      io.Writer
	header []byte // the classic header, until it is whole
	lz     *lzma.Writer
}

func newZipLZMAWriter(w io.Writer) (io.WriteCloser, error) {
	zw := &zipLZMAWriter{w: w}
	lz, err := lzma.WriterConfig{EOSMarker: true}.NewWriter(headerFilter{zw})
	if err != nil {
		return nil, err
	}
	zw.lz = lz
	return zw, nil
}

func (z *zipLZMAWriter) Write(p []byte) (int, error) { return z.lz.Write(p) }
func (z *zipLZMAWriter) Close() error                { return z.lz.Close() }

// headerFilter receives the lzma package's output.
type headerFilter struct{ z *zipLZMAWriter }

func (h headerFilter) Write(p []byte) (int, error) {
	z, n := h.z, len(p)
	if len(z.header) < lzma.HeaderLen {
		take := min(lzma.HeaderLen-len(z.header), len(p))
		z.header = append(z.header, p[:take]...)
		p = p[take:]
		if len(z.header) == lzma.HeaderLen {
			out := []byte{16, 2, 5, 0} // written by "LZMA SDK 16.02", 5 bytes of properties
			out = append(out, z.header[:5]...)
			if _, err := z.w.Write(out); err != nil {
				return 0, err
			}
		}
	}
	if len(p) > 0 {
		if _, err := z.w.Write(p); err != nil {
			return 0, err
		}
	}
	return n, nil
}

func newZipLZMAReader(r io.Reader) io.ReadCloser {
	var head [4]byte
	if _, err := io.ReadFull(r, head[:]); err != nil {
		return errReader{zip.ErrFormat}
	}
	size := binary.LittleEndian.Uint16(head[2:])
	if size != 5 {
		return errReader{errors.New("zip: unsupported LZMA properties")}
	}
	classic := make([]byte, lzma.HeaderLen)
	if _, err := io.ReadFull(r, classic[:5]); err != nil {
		return errReader{zip.ErrFormat}
	}
	for i := 5; i < lzma.HeaderLen; i++ {
		classic[i] = 0xff // unknown size: the stream ends with its marker
	}
	lr, err := lzma.ReaderConfig{DictCap: 1 << 28}.NewReader(io.MultiReader(bytes.NewReader(classic), r))
	if err != nil {
		return errReader{err}
	}
	return io.NopCloser(lr)
}

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }
func (e errReader) Close() error             { return nil }
