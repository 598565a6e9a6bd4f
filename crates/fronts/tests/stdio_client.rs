//! `stdio::serve` serves one client on an engine that may outlive it (the daemon runs it
//! per connection on one shared engine): a client going away must leave the engine
//! serving as before, children forked ahead included. Needs `cargo build --workspace`
//! first (the zygote binary) and a real R.

use rsandbox::{Engine, EngineConfig};
use std::time::{Duration, Instant};

#[test]
fn a_client_going_away_leaves_the_engine_forking_ahead() {
    let engine = Engine::start(EngineConfig { prefork: 1, ..EngineConfig::default() })
        .expect("engine starts (did you run cargo build --workspace?)");
    let mut answers = Vec::new();
    for id in 1..=2 {
        let line = format!("{{\"op\":\"eval\",\"id\":{id},\"code\":\"1+1\"}}\n");
        let output = SharedBuffer::default();
        fronts::stdio::serve(engine.clone(), input_of(&line), output.clone()).expect("serve");
        answers.push(output.text());
        // The child this client used is replaced: one waits again for the next client.
        let deadline = Instant::now() + Duration::from_secs(20);
        while engine.warm_status().idle == 0 {
            assert!(Instant::now() < deadline, "no child forked ahead after client {id}: {:?}", engine.warm_status());
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    for answer in answers {
        assert!(answer.contains("\"outcome\":\"ok\""), "{answer}");
    }
}

/// A pipe holding `text`, its writing end closed: a client that sent it and left.
fn input_of(text: &str) -> std::os::fd::OwnedFd {
    let (reader, writer) = std::io::pipe().expect("pipe");
    let mut writer = writer;
    std::io::Write::write_all(&mut writer, text.as_bytes()).expect("write the request");
    drop(writer);
    reader.into()
}

/// An output both the server (which takes it by value) and the test can read.
#[derive(Clone, Default)]
struct SharedBuffer(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl SharedBuffer {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }
}

impl std::io::Write for SharedBuffer {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(data);
        Ok(data.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}
