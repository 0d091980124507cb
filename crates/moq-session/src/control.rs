//! Framing of control messages over the bidirectional control stream.

use moq_wire::draft14::ControlMessage;

use crate::error::SessionError;

/// Reads whole control messages from the control stream.
pub struct ControlReader {
    recv: quinn::RecvStream,
    buf: Vec<u8>,
}

impl ControlReader {
    pub fn new(recv: quinn::RecvStream) -> ControlReader {
        ControlReader {
            recv,
            buf: Vec::new(),
        }
    }

    /// The next whole message; an error once the stream ends or a message is malformed.
    pub async fn read(&mut self) -> Result<ControlMessage, SessionError> {
        loop {
            if !self.buf.is_empty() {
                match ControlMessage::decode(&self.buf) {
                    Ok((msg, used)) => {
                        self.buf.drain(..used);
                        return Ok(msg);
                    }
                    Err(e) if e.is_incomplete() => {}
                    Err(e) => return Err(SessionError::decode(e)),
                }
            }
            let mut chunk = [0u8; 4096];
            match self.recv.read(&mut chunk).await {
                Ok(Some(n)) => self.buf.extend_from_slice(&chunk[..n]),
                Ok(None) => return Err(SessionError::ControlClosed),
                Err(quinn::ReadError::ConnectionLost(e)) => return Err(e.into()),
                Err(_) => return Err(SessionError::ControlClosed),
            }
        }
    }
}

/// Writes one control message.
pub(crate) async fn write(
    send: &mut quinn::SendStream,
    msg: &ControlMessage,
) -> Result<(), SessionError> {
    let mut buf = Vec::new();
    msg.encode(&mut buf)
        .map_err(|e| SessionError::violation(format!("cannot encode {}: {e}", msg.name())))?;
    send.write_all(&buf).await.map_err(|e| match e {
        quinn::WriteError::ConnectionLost(e) => SessionError::Connection(e),
        _ => SessionError::ControlClosed,
    })
}
