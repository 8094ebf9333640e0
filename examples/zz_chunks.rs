fn main() {
    let mut total = 0;
    let mut tiny = 0;
    for dir in std::env::args().skip(1) {
        for e in std::fs::read_dir(&dir).unwrap() {
            let p = e.unwrap().path();
            if !p.is_file() {
                continue;
            }
            let t = std::fs::read_to_string(&p).unwrap_or_default();
            let title = replicad::text::chunk::generated_title(&t);
            let c = replicad::text::chunk::chunk(&title, &t);
            for (i, ch) in c.iter().enumerate() {
                total += 1;
                let next_deeper = c.get(i + 1).map_or(false, |n| n.title.starts_with(&format!("{} ›", ch.title)));
                if ch.text.len() < 400 && next_deeper {
                    tiny += 1;
                    println!(
                        "{:4} {} | {}",
                        ch.text.len(),
                        ch.title,
                        ch.text.replace('\n', " ").chars().take(80).collect::<String>()
                    );
                }
            }
        }
    }
    println!("total {total} tiny-preamble {tiny}");
}
