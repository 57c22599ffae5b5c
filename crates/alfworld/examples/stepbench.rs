// Times replaying the walkthrough + random commands of transcripts (dev aid).
use std::io::BufRead;
fn main() {
    let path = std::env::args().nth(1).unwrap();
    let data = alfworld::AlfworldData::open_default().unwrap_or_else(|e| panic!("{e}"));
    let f = std::fs::File::open(&path).unwrap();
    let mut total_steps = 0; let mut step_time = std::time::Duration::ZERO; let mut reset_time = std::time::Duration::ZERO; let mut resets = 0;
    for _rep in 0..3 {
    let f = std::fs::File::open(&path).unwrap();
    for line in std::io::BufReader::new(f).lines() {
        let v: serde_json::Value = serde_json::from_str(&line.unwrap()).unwrap();
        let text = data.read(v["game"].as_str().unwrap()).unwrap();
        let t = std::time::Instant::now();
        let game = std::sync::Arc::new(alfworld::load_game(&text).unwrap());
        let (mut s, _) = textworld::Session::start(game).unwrap();
        reset_time += t.elapsed(); resets += 1;
        let cmds: Vec<String> = v["steps"].as_array().unwrap()[1..].iter().map(|s| s["command"].as_str().unwrap().to_string()).collect();
        let t = std::time::Instant::now();
        for c in &cmds { s.step(c).unwrap(); }
        step_time += t.elapsed(); total_steps += cmds.len();
    }
    }
    let _ = f;
    println!("resets {resets} mean {:?}; steps {total_steps} mean {:?}", reset_time / resets as u32, step_time / total_steps as u32);
}
