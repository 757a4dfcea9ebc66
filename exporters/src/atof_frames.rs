//! zstd frames of whole ATOF lines: each closed frame compressed on its own (with a
//! checksum), and a file's frames decoded back one at a time, so that a frame a kill
//! cut short is found, named and left out while every whole frame before it is kept.

use std::io::{BufRead, Read};

use zstd::stream::raw::{Decoder, InBuffer, Operation, OutBuffer};

/// zstd's default level: about 10 MB/s of lines per core costs little beside a poll.
const COMPRESSION_LEVEL: i32 = 3;
/// Compressed bytes read from the file at a time.
const INPUT_BLOCK: usize = 64 * 1024;
/// Room made in the frame buffer before each decoding step.
const OUTPUT_STEP: usize = 128 * 1024;
/// The most a frame may decode to: the writer closes frames at 1 MiB (plus one line),
/// so a frame past this is not one it wrote, and memory stays bounded.
pub const MAX_DECODED_FRAME_BYTES: usize = 64 * 1024 * 1024;

/// Compresses closed frames, one independent zstd frame each.
pub(crate) struct FrameCompressor {
    compressor: zstd::bulk::Compressor<'static>,
}

impl std::fmt::Debug for FrameCompressor {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("FrameCompressor")
            .field("level", &COMPRESSION_LEVEL)
            .finish()
    }
}

impl FrameCompressor {
    /// A compressor at [`COMPRESSION_LEVEL`] writing a checksum in every frame.
    pub(crate) fn new() -> std::io::Result<Self> {
        let mut compressor = zstd::bulk::Compressor::new(COMPRESSION_LEVEL)?;
        compressor.set_parameter(zstd::zstd_safe::CParameter::ChecksumFlag(true))?;
        Ok(FrameCompressor { compressor })
    }

    /// `lines` as one whole zstd frame.
    pub(crate) fn compress(&mut self, lines: &[u8]) -> std::io::Result<Vec<u8>> {
        self.compressor.compress(lines)
    }
}

/// What [`FrameReader::next_frame`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrameOutcome {
    /// A whole frame, its checksum right, spanning file bytes `start..end`.
    Frame {
        /// Offset of its first byte.
        start: u64,
        /// Offset past its last byte.
        end: u64,
    },
    /// The file ends after the last whole frame.
    End,
    /// The file ends inside a frame that starts at `start`: a write that did not
    /// finish. What it decoded to is not given.
    CutShort {
        /// Offset of the cut frame's first byte.
        start: u64,
        /// The file's length.
        end: u64,
    },
}

/// Why the frames could not be read.
#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    /// The file could not be read.
    #[error("{0}")]
    Read(#[from] std::io::Error),
    /// The bytes at `start` are not a valid zstd frame (or its checksum is wrong).
    #[error("the zstd frame at byte {start} is corrupt: {reason}")]
    Corrupt {
        /// Offset of the frame's first byte.
        start: u64,
        /// What zstd said.
        reason: String,
    },
    /// The frame at `start` decodes to more than [`MAX_DECODED_FRAME_BYTES`].
    #[error(
        "the zstd frame at byte {start} decodes to more than {MAX_DECODED_FRAME_BYTES} bytes: not a frame of whole ATOF lines"
    )]
    TooLarge {
        /// Offset of the frame's first byte.
        start: u64,
    },
}

/// Decodes a stream of zstd frames one whole frame at a time.
pub struct FrameReader<R> {
    source: R,
    decoder: Decoder<'static>,
    input: Vec<u8>,
    input_at: usize,
    input_len: usize,
    /// Bytes of the source consumed by the decoder.
    consumed: u64,
}

impl<R: Read> FrameReader<R> {
    /// A reader of the frames in `source`.
    pub fn new(source: R) -> std::io::Result<Self> {
        Ok(FrameReader {
            source,
            decoder: Decoder::new()?,
            input: vec![0; INPUT_BLOCK],
            input_at: 0,
            input_len: 0,
            consumed: 0,
        })
    }

    /// Decodes the next frame into `frame` (emptied first).
    pub fn next_frame(&mut self, frame: &mut Vec<u8>) -> Result<FrameOutcome, FrameError> {
        frame.clear();
        let start = self.consumed;
        loop {
            if self.input_at == self.input_len {
                let read = loop {
                    match self.source.read(&mut self.input) {
                        Ok(read) => break read,
                        Err(error) if error.kind() == std::io::ErrorKind::Interrupted => {}
                        Err(error) => return Err(error.into()),
                    }
                };
                self.input_at = 0;
                self.input_len = read;
                if read == 0 {
                    return Ok(if self.consumed == start {
                        FrameOutcome::End
                    } else {
                        FrameOutcome::CutShort {
                            start,
                            end: self.consumed,
                        }
                    });
                }
            }
            if frame.capacity() - frame.len() < OUTPUT_STEP {
                if frame.len() >= MAX_DECODED_FRAME_BYTES {
                    return Err(FrameError::TooLarge { start });
                }
                frame.reserve(OUTPUT_STEP);
            }
            let mut input = InBuffer::around(&self.input[self.input_at..self.input_len]);
            let position = frame.len();
            let mut output = OutBuffer::around_pos(frame, position);
            let remaining =
                self.decoder
                    .run(&mut input, &mut output)
                    .map_err(|error| FrameError::Corrupt {
                        start,
                        reason: error.to_string(),
                    })?;
            let read = input.pos();
            self.input_at += read;
            self.consumed += read as u64;
            if remaining == 0 {
                return Ok(FrameOutcome::Frame {
                    start,
                    end: self.consumed,
                });
            }
        }
    }
}

/// The lines of a compressed file, one whole frame at a time: a [`BufRead`] whose
/// memory is one frame, that ends before a frame cut short and keeps what ended it.
pub struct FrameLines<R> {
    frames: FrameReader<R>,
    frame: Vec<u8>,
    at: usize,
    ended: Option<FrameOutcome>,
    whole_frames: u64,
}

impl<R: Read> FrameLines<R> {
    /// The lines of the frames in `source`.
    pub fn new(source: R) -> std::io::Result<Self> {
        Ok(FrameLines {
            frames: FrameReader::new(source)?,
            frame: Vec::new(),
            at: 0,
            ended: None,
            whole_frames: 0,
        })
    }

    /// How the frames ended ([`FrameOutcome::End`] or [`FrameOutcome::CutShort`]), once
    /// every line has been read.
    pub fn ended(&self) -> Option<FrameOutcome> {
        self.ended
    }

    /// Whole frames read so far.
    pub fn whole_frames(&self) -> u64 {
        self.whole_frames
    }
}

impl<R: Read> Read for FrameLines<R> {
    fn read(&mut self, buffer: &mut [u8]) -> std::io::Result<usize> {
        let available = self.fill_buf()?;
        let count = available.len().min(buffer.len());
        buffer[..count].copy_from_slice(&available[..count]);
        self.consume(count);
        Ok(count)
    }
}

impl<R: Read> BufRead for FrameLines<R> {
    fn fill_buf(&mut self) -> std::io::Result<&[u8]> {
        while self.at == self.frame.len() && self.ended.is_none() {
            self.at = 0;
            match self.frames.next_frame(&mut self.frame) {
                Ok(FrameOutcome::Frame { .. }) => self.whole_frames += 1,
                Ok(outcome) => {
                    self.frame.clear();
                    self.ended = Some(outcome);
                }
                Err(FrameError::Read(error)) => return Err(error),
                Err(error) => {
                    return Err(std::io::Error::new(std::io::ErrorKind::InvalidData, error));
                }
            }
        }
        Ok(&self.frame[self.at..])
    }

    fn consume(&mut self, amount: usize) {
        self.at = (self.at + amount).min(self.frame.len());
    }
}

/// Whether `head` (a file's first bytes) starts with the zstd frame magic number.
pub fn is_zstd(head: &[u8]) -> bool {
    head.starts_with(&[0x28, 0xb5, 0x2f, 0xfd])
}

/// Cuts a compressed file back to the end of its last whole frame; returns the length
/// kept and whether anything was cut. A corrupt frame is an error: what follows it
/// cannot be found, so nothing is cut.
pub(crate) fn cut_unfinished_frame(path: &std::path::Path) -> std::io::Result<(u64, bool)> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)?;
    let mut frames = FrameReader::new(&file)?;
    let mut scratch = Vec::new();
    loop {
        match frames.next_frame(&mut scratch) {
            Ok(FrameOutcome::Frame { .. }) => {}
            Ok(FrameOutcome::End) => return Ok((frames.consumed, false)),
            Ok(FrameOutcome::CutShort { start, .. }) => {
                file.set_len(start)?;
                return Ok((start, true));
            }
            Err(FrameError::Read(error)) => return Err(error),
            Err(error) => {
                return Err(std::io::Error::new(std::io::ErrorKind::InvalidData, error));
            }
        }
    }
}
