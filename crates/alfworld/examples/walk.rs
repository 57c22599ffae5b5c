fn main() {
    let path = std::env::args().nth(1).unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    let t = std::time::Instant::now();
    let game = std::sync::Arc::new(alfworld::load_game(&text).unwrap());
    let (mut s, obs) = textworld::Session::start(game.clone()).unwrap();
    eprintln!("load+reset {:?}", t.elapsed());
    println!("{:?}\n{:?}", obs.feedback, obs.admissible_commands);
    let mut cmds: Vec<String> = game.walkthrough.clone();
    cmds.extend(std::env::args().skip(2));
    for c in cmds {
        let t = std::time::Instant::now();
        let o = s.step(&c).unwrap();
        eprintln!("step {:?}", t.elapsed());
        println!("> {c}\n{:?} won={} n={}", o.feedback, o.won, o.admissible_commands.len());
    }
}
